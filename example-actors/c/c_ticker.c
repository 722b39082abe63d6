/* c_ticker: the ticker of `example-actors/ticker` in C: timers on demand (init: the path R to
 * report to).
 *
 * It speaks the example protocol's `Timer` in JSON (kind `Timer`), as the Python and JavaScript
 * ports do:
 * - {"Once":{"delay_ms":100,"tag":1}}, {"Every":{"period_ms":50,"tag":2}}: a timer to itself
 *   that delivers {"Fired":{"tag":1}} once or every period; a `Fired` is reported `fired` = tag;
 * - {"Cancel":{"tag":2}} cancels the tag's timer, reported `cancelled` = 1 if the host
 *   cancelled it, 0 if it had already fired (one-shot) or the tag is unknown.
 * Reports are the protocol's `Report` in JSON (protocol.h). Anything else is a dead letter.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"
#include "protocol.h"

#define MAX_TIMERS 32

static char *report_to;
static mote_address_t me;
static struct {
    uint64_t tag, id;
} timers[MAX_TIMERS];
static size_t timer_count;

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (init_len == 0) return "init: the path to report to is missing";
    report_to = text_of(init, init_len);
    me = mote_myself();
    timer_count = 0;
    return NULL;
}

static const char *report(const char *label, uint64_t value) {
    MOTE_TRY(report_json(report_to, me.path.ptr, me.path.len, label, value));
    return NULL;
}

static const char *start_timer(uint64_t tag, uint64_t ms, bool periodic) {
    if (timer_count == MAX_TIMERS) return "too many timers";
    mote_buf_t fired = {0};
    mote_buf_str(&fired, "{\"Fired\":{\"tag\":");
    mote_buf_u64(&fired, tag);
    mote_buf_str(&fired, "}}");
    uint64_t id;
    bool set = mote_schedule_self("Timer", fired.data, fired.len, ms, periodic ? ms : 0, &id);
    mote_buf_free(&fired);
    if (!set) return mote_last_error();
    timers[timer_count].tag = tag;
    timers[timer_count].id = id;
    timer_count++;
    return NULL;
}

static const char *cancel(uint64_t tag) {
    bool cancelled = false;
    for (size_t i = 0; i < timer_count; i++) {
        if (timers[i].tag != tag) continue;
        cancelled = mote_cancel_timer(timers[i].id);
        timers[i] = timers[--timer_count];
        break;
    }
    return report("cancelled", cancelled);
}

const char *mote_receive(const mote_msg_t *msg) {
    char order[16];
    const uint8_t *arg;
    size_t arg_len;
    uint64_t tag, ms;
    if (!mote_is(msg, "Timer") ||
        !mote_json_variant(msg->body, msg->body_len, order, sizeof order, &arg, &arg_len) ||
        !mote_json_u64(arg, arg_len, "tag", &tag)) {
        mote_reject("c_ticker: not a Timer order");
        return NULL;
    }
    if (!strcmp(order, "Once") && mote_json_u64(arg, arg_len, "delay_ms", &ms))
        return start_timer(tag, ms, false);
    if (!strcmp(order, "Every") && mote_json_u64(arg, arg_len, "period_ms", &ms))
        return start_timer(tag, ms, true);
    if (!strcmp(order, "Cancel")) return cancel(tag);
    if (!strcmp(order, "Fired")) return report("fired", tag);
    mote_reject("c_ticker: a Timer order it does not know");
    return NULL;
}
