/* c_features: the features actor of every guest SDK, in C (its spec is
 * `features_work_through_mote` in tests/src/scenarios.rs): asks, topics, groups, the stash,
 * behaviours, reminders, forwarding, the urgent lane, naming, delivery modes, lookup and the
 * clock, spoken in JSON.
 *
 * Init: the path R to report to. `mote_start` recovers (reminders need a persistent actor),
 * subscribes to topic `features` and joins group `workers`. Each report is the protocol's
 * `Report` in JSON, {"from": <its path>, "label": .., "value": ..}, told to R.
 * - `ask-self` {"n"} asks itself `echo` {"n"} (2 s); the reply is reported `answered` n (the
 *   reply's);
 * - `echo` {"n"} replies `echoed` {"n": n + 1};
 * - `ask-silent` asks itself `silent` (100 ms), which it ignores: the timeout is reported
 *   `ask-timeout` 1;
 * - `publish` {"n"} publishes `news` {"n"} to `features`, reported `published` (subscribers
 *   reached); `news` {"n"} is reported `news` n;
 * - `broadcast` {"n"} sends `work` {"n"} to every member of `workers` (`broadcast`, members
 *   reached), `group` {"n"} to one (`grouped` 1 if one got it); `work` {"n"} is reported `work` n;
 * - `close` becomes `closed`: there `add` is stashed (`stashed` n) and `open` unbecomes and
 *   unstashes all; `add` {"n"} adds n to the total, reported `total` (the new total);
 * - `remind` {"delay_ms"} sets a reminder `reminded` {"n": 1}, reported `reminded` n when it
 *   comes; `remind-cancel` {"delay_ms"} sets one and cancels it at once (`reminder-cancelled` 1
 *   if the cancel found it);
 * - `forward` {"n"} forwards a Report `forwarded` n to R (the sender stays the original one);
 * - `urgent` {"n"} tells R a Report `urgent` n on its urgent lane;
 * - `alias` takes the alias `feat` (`aliased` 1 if it got `/system/alias/feat`), `unalias`
 *   gives it up (`unaliased` 1 if it held it);
 * - `delivery` sets at-most-once delivery, reads it back and sets at-least-once again
 *   (`delivery` 1 if it read at-most-once);
 * - `inspect` reports `resolved` 1 if its own path resolves to its own incarnation, `depth` 1 if
 *   its own mailbox has a depth and a path nobody lives at has none, and `clock`
 *   1 if its clock has advanced since `mote_start`.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static char *report_to;     /* R */
static char *my_path;       /* NUL-terminated */
static uint64_t my_incarnation, started_at, total;

/* The asks this actor made. It asks only itself, so the first message from an ask's endpoint
 * is its own request (to be handled like any message) and the second is the reply. */
#define MAX_ASKS 16
static struct ask {
    uint64_t id;
    bool request_seen;
} asks[MAX_ASKS];
static size_t ask_count;

static struct ask *find_ask(uint64_t id) {
    for (size_t i = 0; i < ask_count; i++)
        if (asks[i].id == id) return &asks[i];
    return NULL;
}

static void forget_ask(struct ask *ask) { *ask = asks[--ask_count]; }

static const char *closed(const mote_msg_t *msg);

typedef enum lane { TELL, FORWARD, URGENT } lane_t;

/* Sends R the Report `label` `value`: told, forwarded (with the original sender) or urgent. */
static const char *report_on(lane_t lane, const char *label, uint64_t value) {
    mote_buf_t body = {0};
    mote_buf_str(&body, "{\"from\":\"");
    mote_buf_str(&body, my_path);
    mote_buf_str(&body, "\",\"label\":\"");
    mote_buf_str(&body, label);
    mote_buf_str(&body, "\",\"value\":");
    mote_buf_u64(&body, value);
    mote_buf_str(&body, "}");
    bool sent = lane == FORWARD  ? mote_forward_path(report_to, "Report", body.data, body.len)
                : lane == URGENT ? mote_tell_urgent_path(report_to, "Report", body.data, body.len)
                                 : mote_tell_path(report_to, "Report", body.data, body.len);
    mote_buf_free(&body);
    return sent ? NULL : mote_last_error();
}

static const char *report(const char *label, uint64_t value) {
    return report_on(TELL, label, value);
}

/* The body {"n": n}. */
static size_t n_body(uint64_t n, char *out) {
    char digits[21];
    size_t len = mote_u64_to_text(n, digits);
    memcpy(out, "{\"n\":", 5);
    memcpy(out + 5, digits, len);
    out[5 + len] = '}';
    return len + 6;
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (init_len == 0) return "init: the path to report to is missing";
    report_to = malloc(init_len + 1);
    memcpy(report_to, init, init_len);
    report_to[init_len] = 0;
    mote_address_t me = mote_myself();
    my_path = malloc(me.path.len + 1);
    memcpy(my_path, me.path.ptr, me.path.len);
    my_path[me.path.len] = 0;
    my_incarnation = me.incarnation;
    mote_address_free(&me);
    started_at = mote_since_start();
    total = ask_count = 0;
    MOTE_TRY(mote_recover(NULL, NULL, NULL, NULL));
    MOTE_TRY(mote_subscribe("features"));
    MOTE_TRY(mote_join("workers"));
    return NULL;
}

static const char *ask_self(const char *kind, const void *body, size_t len, uint64_t ms) {
    if (ask_count == MAX_ASKS) return "too many asks pending";
    uint64_t id;
    MOTE_TRY(mote_ask(my_path, kind, body, len, ms, &id));
    asks[ask_count++] = (struct ask){.id = id, .request_seen = false};
    return NULL;
}

static const char *remind(const mote_msg_t *msg, bool cancel) {
    uint64_t delay, id;
    if (!mote_json_u64(msg->body, msg->body_len, "delay_ms", &delay))
        return "a reminder needs {\"delay_ms\": ..}";
    char body[32];
    MOTE_TRY(mote_remind("reminded", body, n_body(1, body), delay, 0, &id));
    return cancel ? report("reminder-cancelled", mote_cancel_reminder(id)) : NULL;
}

static const char *alias(void) {
    char *path;
    MOTE_TRY(mote_alias("feat", &path));
    bool expected = strcmp(path, "/system/alias/feat") == 0;
    free(path);
    return report("aliased", expected);
}

static const char *delivery(void) {
    mote_set_delivery(MOTE_AT_MOST_ONCE);
    mote_delivery_t mode = mote_delivery();
    mote_set_delivery(MOTE_AT_LEAST_ONCE);
    return report("delivery", mode == MOTE_AT_MOST_ONCE);
}

static const char *inspect(void) {
    mote_address_t found;
    bool resolved = mote_resolve(my_path, &found);
    if (resolved) {
        resolved = found.incarnation == my_incarnation;
        mote_address_free(&found);
    }
    const char *error = report("resolved", resolved);
    if (!error) error = report("clock", mote_since_start() > started_at);
    uint32_t depth;
    bool depths = mote_mailbox_depth(my_path, &depth) && !mote_mailbox_depth("/user/nobody", NULL);
    return error ? error : report("depth", depths);
}

const char *mote_receive(const mote_msg_t *msg) {
    uint64_t id, n = 0;
    if (mote_is_ask_timeout(msg, &id)) {
        struct ask *ask = find_ask(id);
        if (!ask) return NULL;
        forget_ask(ask);
        return report("ask-timeout", 1);
    }
    mote_json_u64(msg->body, msg->body_len, "n", &n);
    if (mote_is_answer(msg, &id)) {
        struct ask *ask = find_ask(id);
        if (ask && ask->request_seen) {
            forget_ask(ask);
            return report("answered", n);
        }
        if (ask) ask->request_seen = true; /* its own request: handled below */
    }
    char body[32];
    if (mote_is(msg, "ask-self")) return ask_self("echo", body, n_body(n, body), 2000);
    if (mote_is(msg, "echo")) {
        MOTE_TRY(mote_reply("echoed", body, n_body(n + 1, body)));
        return NULL;
    }
    if (mote_is(msg, "ask-silent")) return ask_self("silent", "{}", 2, 100);
    if (mote_is(msg, "silent")) return NULL;
    if (mote_is(msg, "publish")) {
        uint32_t reached;
        MOTE_TRY(mote_publish("features", "news", body, n_body(n, body), &reached));
        return report("published", reached);
    }
    if (mote_is(msg, "news")) return report("news", n);
    if (mote_is(msg, "broadcast")) {
        uint32_t reached;
        MOTE_TRY(mote_broadcast_group("workers", "work", body, n_body(n, body), &reached));
        return report("broadcast", reached);
    }
    if (mote_is(msg, "group")) {
        bool delivered;
        MOTE_TRY(mote_tell_group("workers", "work", body, n_body(n, body), &delivered));
        return report("grouped", delivered);
    }
    if (mote_is(msg, "work")) return report("work", n);
    if (mote_is(msg, "close")) {
        mote_become(closed);
        return NULL;
    }
    if (mote_is(msg, "add")) {
        total += n;
        return report("total", total);
    }
    if (mote_is(msg, "remind")) return remind(msg, false);
    if (mote_is(msg, "remind-cancel")) return remind(msg, true);
    if (mote_is(msg, "reminded")) return report("reminded", n);
    if (mote_is(msg, "forward")) return report_on(FORWARD, "forwarded", n);
    if (mote_is(msg, "urgent")) return report_on(URGENT, "urgent", n);
    if (mote_is(msg, "alias")) return alias();
    if (mote_is(msg, "unalias")) return report("unaliased", mote_unalias("feat"));
    if (mote_is(msg, "delivery")) return delivery();
    if (mote_is(msg, "inspect")) return inspect();
    if (!mote_is(msg, "open")) mote_warn("c_features: unknown kind");
    return NULL;
}

/* The behaviour after `close`: adds wait in the stash until `open`. The stash and the
 * unbecome take effect when it returns, so the stashed adds come back to `mote_receive`. */
static const char *closed(const mote_msg_t *msg) {
    if (mote_is(msg, "add")) {
        uint64_t n = 0;
        mote_json_u64(msg->body, msg->body_len, "n", &n);
        mote_stash();
        return report("stashed", n);
    }
    if (mote_is(msg, "open")) {
        mote_unbecome();
        mote_unstash_all();
        return NULL;
    }
    return mote_receive(msg);
}
