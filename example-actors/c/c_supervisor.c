/* c_supervisor: a supervising parent in C, the C twin of the Rust `supervisor` in its
 * `by-error` mode.
 *
 * Init: the path R to report to. At start it sets a one-for-one strategy (restart, at most 10
 * restarts a minute), spawns `c0` and `c1` from `c_counter` and watches them.
 * - `mote_supervise` picks the directive from the child's error: the first of `resume`,
 *   `restart`, `stop`, `escalate` it contains (none: the strategy's), and tells R `supervised`
 *   "<child path> <directive>";
 * - a watched child's end (`mote.terminated`) is told to R as `terminated` "<child path>".
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static char *report_to;

static void report(const char *label, const uint8_t *path, size_t path_len, const char *word) {
    mote_buf_t body = {0};
    mote_buf_push(&body, path, path_len);
    if (word) {
        mote_buf_str(&body, " ");
        mote_buf_str(&body, word);
    }
    if (!mote_tell_path(report_to, label, body.data, body.len)) mote_warn(mote_last_error());
    mote_buf_free(&body);
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (init_len == 0) return "init: the path to report to is missing";
    report_to = malloc(init_len + 1);
    memcpy(report_to, init, init_len);
    report_to[init_len] = 0;
    mote_strategy_t strategy = mote_one_for_one(MOTE_RESTART);
    mote_set_strategy(&strategy);
    const char *names[] = {"c0", "c1"};
    for (size_t i = 0; i < 2; i++) {
        mote_address_t child;
        MOTE_TRY(mote_spawn(names[i], "c_counter", NULL, 0, &child));
        bool watched = mote_watch(&child);
        mote_address_free(&child);
        if (!watched) return mote_last_error();
    }
    return NULL;
}

mote_directive_t mote_supervise(const mote_address_t *child, mote_failure_kind_t kind,
                                const char *error) {
    (void)kind;
    static const struct {
        const char *word;
        mote_directive_t directive;
    } by_error[] = {{"resume", MOTE_RESUME},
                    {"restart", MOTE_RESTART},
                    {"stop", MOTE_STOP},
                    {"escalate", MOTE_ESCALATE}};
    for (size_t i = 0; i < 4; i++) {
        if (strstr(error, by_error[i].word)) {
            report("supervised", child->path.ptr, child->path.len, by_error[i].word);
            return by_error[i].directive;
        }
    }
    report("supervised", child->path.ptr, child->path.len, "defer");
    return MOTE_DEFER;
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "mote.terminated") && msg->sender)
        report("terminated", msg->sender->path.ptr, msg->sender->path.len, NULL);
    return NULL;
}
