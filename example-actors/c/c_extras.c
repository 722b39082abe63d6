/* c_extras: the C SDK's helpers the features scenario leaves out, through Mote
 * (tests/c_sdk.rs): spawning with limits, pausing a child, looking into the stash and HTTP
 * call-outs. Bodies are text; each answer is told to the path R given as init, with the
 * label as its kind.
 *
 * - `spawn` "<capacity>" spawns `c_counter` as `w` with that mailbox capacity (`spawned`, its
 *   path); `spawn-on` "<node>" spawns one on that node (`spawned-on`: "ok" or why not);
 * - `pause` / `resume` deactivate / activate `w` (`paused` / `resumed`: 1 if it is a child);
 * - `inspect` "<id>" sets that persistence id (empty: none) and answers `inspected`
 *   "<parent path or -> <children> <persistence id> <1 if its CPU time is above 0>";
 * - `hold` and `keep` are stashed; `peek` / `take` "<kind>" (empty: any kind) look for the
 *   oldest stashed one (`peeked` / `took`: "<kind> <body> <stashed>", or "none <stashed>");
 * - `fetch` "<url>" starts a GET with the header `x-from: c` (`fetching` "<id>", or `refused`
 *   and why); its outcome is told as `fetched` "<id> <status> <x-test header> <body>" (or
 *   `fetch-failed` "<id> <why>"), and taking it a second time finds nothing (`again` "none").
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static char *report_to;
static mote_address_t worker;
static bool has_worker;

/* Tells R `label` with the text `a` and, if not NULL, " " and `b`. */
static const char *answer(const char *label, const char *a, const char *b) {
    mote_buf_t body = {0};
    mote_buf_str(&body, a);
    if (b) {
        mote_buf_str(&body, " ");
        mote_buf_str(&body, b);
    }
    bool sent = mote_tell_path(report_to, label, body.data, body.len);
    mote_buf_free(&body);
    return sent ? NULL : mote_last_error();
}

/* The body as a NUL-terminated string (malloc'd). */
static char *body_text(const mote_msg_t *msg) {
    char *text = malloc(msg->body_len + 1);
    memcpy(text, msg->body, msg->body_len);
    text[msg->body_len] = 0;
    return text;
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (init_len == 0) return "init: the path to report to is missing";
    report_to = malloc(init_len + 1);
    memcpy(report_to, init, init_len);
    report_to[init_len] = 0;
    has_worker = false;
    return NULL;
}

static const char *spawn(const mote_msg_t *msg) {
    uint64_t capacity;
    if (!mote_text_to_u64(msg->body, msg->body_len, &capacity)) return "spawn: no capacity";
    mote_limits_t limits = {.mailbox_capacity = (uint32_t)capacity};
    if (has_worker) mote_address_free(&worker);
    has_worker = false;
    MOTE_TRY(mote_spawn_with("w", "c_counter", NULL, 0, &limits, &worker));
    has_worker = true;
    char *path = malloc(worker.path.len + 1);
    memcpy(path, worker.path.ptr, worker.path.len);
    path[worker.path.len] = 0;
    const char *error = answer("spawned", path, NULL);
    free(path);
    return error;
}

static const char *spawn_on(const mote_msg_t *msg) {
    char *node = body_text(msg);
    mote_limits_t limits = {.descendants = MOTE_NO_DESCENDANTS};
    bool ok = mote_spawn_on(node, "remote", "c_counter", NULL, 0, &limits, NULL);
    free(node);
    return answer("spawned-on", ok ? "ok" : mote_last_error(), NULL);
}

/* `peeked` or `took`: the oldest stashed message of the body's kind, and the stash's size. */
static const char *look(const mote_msg_t *msg, bool take) {
    char *kind = body_text(msg);
    mote_msg_t *found = take ? mote_take(*kind ? kind : NULL) : mote_peek(*kind ? kind : NULL);
    free(kind);
    char stashed[21];
    mote_u64_to_text(mote_stashed(), stashed);
    mote_buf_t text = {0};
    if (found) {
        mote_buf_str(&text, found->kind);
        mote_buf_str(&text, " ");
        mote_buf_push(&text, found->body, found->body_len);
    } else {
        mote_buf_str(&text, "none");
    }
    mote_buf_push(&text, "", 1);
    mote_msg_free(found);
    const char *error = answer(take ? "took" : "peeked", (const char *)text.data, stashed);
    mote_buf_free(&text);
    return error;
}

static const char *inspect(const mote_msg_t *msg) {
    if (msg->body_len) {
        char *id = body_text(msg);
        bool set = mote_set_persistence_id(id);
        free(id);
        MOTE_TRY(set);
    }
    mote_buf_t text = {0};
    mote_address_t parent;
    if (mote_parent(&parent)) {
        mote_buf_push(&text, parent.path.ptr, parent.path.len);
        mote_address_free(&parent);
    } else {
        mote_buf_str(&text, "-");
    }
    mote_address_t *children;
    size_t count;
    mote_children(&children, &count);
    mote_children_free(children, count);
    mote_buf_str(&text, " ");
    mote_buf_u64(&text, count);
    char *pid = mote_persistence_id();
    mote_buf_str(&text, " ");
    mote_buf_str(&text, pid);
    free(pid);
    mote_buf_str(&text, mote_cpu_time() > 0 ? " 1" : " 0");
    mote_buf_push(&text, "", 1);
    const char *error = answer("inspected", (const char *)text.data, NULL);
    mote_buf_free(&text);
    return error;
}

static const char *fetch(const mote_msg_t *msg) {
    char *url = body_text(msg);
    mote_http_header_t from = {"x-from", "c"};
    mote_http_request_t request = {
        .method = "GET",
        .url = url,
        .headers = &from,
        .header_count = 1,
        .timeout_ms = 5000,
    };
    uint64_t id;
    bool started = mote_http_request(&request, &id);
    free(url);
    if (!started) return answer("refused", mote_last_error(), NULL);
    char digits[21];
    mote_u64_to_text(id, digits);
    return answer("fetching", digits, NULL);
}

static const char *fetched(uint64_t id) {
    char digits[21];
    mote_u64_to_text(id, digits);
    mote_http_response_t response;
    if (!mote_http_response(id, &response)) return answer("fetch-failed", digits, mote_last_error());
    mote_buf_t text = {0};
    mote_buf_str(&text, digits);
    mote_buf_str(&text, " ");
    mote_buf_u64(&text, response.status);
    mote_buf_str(&text, " ");
    const char *x_test = mote_http_header(&response, "X-Test");
    mote_buf_str(&text, x_test ? x_test : "-");
    mote_buf_str(&text, " ");
    mote_buf_push(&text, response.body, response.body_len);
    mote_buf_push(&text, "", 1);
    mote_http_response_free(&response);
    const char *error = answer("fetched", (const char *)text.data, NULL);
    mote_buf_free(&text);
    if (error) return error;
    mote_http_response_t twice;
    if (mote_http_response(id, &twice)) {
        mote_http_response_free(&twice);
        return answer("again", "taken twice", NULL);
    }
    return answer("again", "none", NULL);
}

const char *mote_receive(const mote_msg_t *msg) {
    uint64_t id;
    if (mote_is_http_response(msg, &id)) return fetched(id);
    if (mote_is(msg, "spawn")) return spawn(msg);
    if (mote_is(msg, "spawn-on")) return spawn_on(msg);
    if (mote_is(msg, "pause") || mote_is(msg, "resume")) {
        bool pause = mote_is(msg, "pause");
        bool done = has_worker && (pause ? mote_deactivate(&worker) : mote_activate(&worker));
        return answer(pause ? "paused" : "resumed", done ? "1" : "0", NULL);
    }
    if (mote_is(msg, "hold") || mote_is(msg, "keep")) {
        mote_stash();
        return NULL;
    }
    if (mote_is(msg, "peek")) return look(msg, false);
    if (mote_is(msg, "take")) return look(msg, true);
    if (mote_is(msg, "inspect")) return inspect(msg);
    if (mote_is(msg, "fetch")) return fetch(msg);
    mote_warn("c_extras: unknown kind");
    return NULL;
}
