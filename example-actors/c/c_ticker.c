/* c_ticker: timers in C, the C twin of the Rust `ticker`.
 *
 * Init: the path R to report to. Bodies are flat JSON objects; each timer is named by a tag.
 * - `once` {"delay_ms": 100, "tag": 1} sends itself `fired` "1" after 100 ms;
 * - `every` {"period_ms": 50, "tag": 2} sends itself `fired` "2" every 50 ms;
 * - `cancel` {"tag": 2} cancels the timer and tells R `cancelled` "1" if the host cancelled it,
 *   "0" if it had already fired (one-shot) or the tag is unknown;
 * - `fired` "<tag>" tells R `fired` "<tag>".
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

#define MAX_TIMERS 32

static char *report_to;
static struct {
    uint64_t tag, id;
} timers[MAX_TIMERS];
static size_t timer_count;

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (init_len == 0) return "init: the path to report to is missing";
    report_to = malloc(init_len + 1);
    memcpy(report_to, init, init_len);
    report_to[init_len] = 0;
    timer_count = 0;
    return NULL;
}

static const char *report(const char *label, uint64_t value) {
    char text[21];
    MOTE_TRY(mote_tell_path(report_to, label, text, mote_u64_to_text(value, text)));
    return NULL;
}

static const char *start_timer(const mote_msg_t *msg, bool periodic) {
    uint64_t tag, ms, id;
    if (!mote_json_u64(msg->body, msg->body_len, "tag", &tag) ||
        !mote_json_u64(msg->body, msg->body_len, periodic ? "period_ms" : "delay_ms", &ms))
        return "a timer order needs a tag and a delay or period";
    if (timer_count == MAX_TIMERS) return "too many timers";
    char text[21];
    MOTE_TRY(mote_schedule_self("fired", text, mote_u64_to_text(tag, text), ms,
                                periodic ? ms : 0, &id));
    timers[timer_count].tag = tag;
    timers[timer_count].id = id;
    timer_count++;
    return NULL;
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "once")) return start_timer(msg, false);
    if (mote_is(msg, "every")) return start_timer(msg, true);
    if (mote_is(msg, "cancel")) {
        uint64_t tag;
        if (!mote_json_u64(msg->body, msg->body_len, "tag", &tag)) return "cancel needs a tag";
        bool cancelled = false;
        for (size_t i = 0; i < timer_count; i++) {
            if (timers[i].tag != tag) continue;
            cancelled = mote_cancel_timer(timers[i].id);
            timers[i] = timers[--timer_count];
            break;
        }
        return report("cancelled", cancelled);
    }
    if (mote_is(msg, "fired")) {
        uint64_t tag;
        if (!mote_text_to_u64(msg->body, msg->body_len, &tag)) return "fired: bad tag";
        return report("fired", tag);
    }
    return NULL;
}
