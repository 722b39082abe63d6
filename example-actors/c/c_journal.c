/* c_journal: the journal of `example-actors/journal` in C: a durable list of values, kept as
 * events with a snapshot every N (init: N; absent or 0, never), recovered after any restart.
 *
 * It speaks the example protocol's `Journal` in JSON (kind `Journal`), as the Python and
 * JavaScript ports do: {"Append":5}, {"AppendRange":{"from":1,"count":3}}, "Query" (replies a
 * `JournalState` {"values":[...],"recovered_from_snapshot":true,"replayed":8}: how this instance
 * recovered), "Forget" (deletes its durable state and stops) and "Crash" (traps, for its
 * supervisor to restart it from the store). Anything else is a dead letter.
 *
 * Events are a value as 8 bytes little-endian; the snapshot is the values one after another.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"
#include "protocol.h"

static uint64_t *values;
static size_t count, capacity;
static uint64_t snapshot_every;
static mote_recovery_t recovery;

static void push(uint64_t value) {
    if (count == capacity) {
        capacity = capacity ? capacity * 2 : 64;
        values = realloc(values, capacity * sizeof *values);
        if (!values) abort();
    }
    values[count++] = value;
}

static uint64_t read_le(const uint8_t *bytes) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | bytes[i];
    return v;
}

static void write_le(uint64_t v, uint8_t *bytes) {
    for (int i = 0; i < 8; i++, v >>= 8) bytes[i] = (uint8_t)v;
}

static void on_snapshot(void *state, const uint8_t *data, size_t len) {
    (void)state;
    for (size_t i = 0; i + 8 <= len; i += 8) push(read_le(data + i));
}

static void on_event(void *state, uint64_t seq, const uint8_t *data, size_t len) {
    (void)state;
    (void)seq;
    if (len == 8) push(read_le(data));
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    if (!mote_text_to_u64(init, init_len, &snapshot_every)) snapshot_every = 0;
    count = 0;
    MOTE_TRY(mote_recover(NULL, on_snapshot, on_event, &recovery));
    return NULL;
}

static const char *append(uint64_t value) {
    uint8_t event[8];
    write_le(value, event);
    uint64_t seq;
    MOTE_TRY(mote_persist(event, sizeof event, &seq));
    push(value);
    if (snapshot_every > 0 && seq % snapshot_every == 0) {
        uint8_t *state = malloc(count * 8);
        for (size_t i = 0; i < count; i++) write_le(values[i], state + i * 8);
        bool saved = mote_save_snapshot(state, count * 8, NULL);
        free(state);
        if (!saved) return mote_last_error();
    }
    return NULL;
}

static const char *query(void) {
    mote_buf_t body = {0};
    mote_buf_str(&body, "{\"values\":[");
    for (size_t i = 0; i < count; i++) {
        if (i) mote_buf_str(&body, ",");
        mote_buf_u64(&body, values[i]);
    }
    mote_buf_str(&body, "],\"recovered_from_snapshot\":");
    mote_buf_str(&body, recovery.from_snapshot ? "true" : "false");
    mote_buf_str(&body, ",\"replayed\":");
    mote_buf_u64(&body, recovery.replayed);
    mote_buf_str(&body, "}");
    return reply_json("JournalState", &body);
}

const char *mote_receive(const mote_msg_t *msg) {
    char order[16];
    const uint8_t *arg;
    size_t arg_len;
    if (!mote_is(msg, "Journal") ||
        !mote_json_variant(msg->body, msg->body_len, order, sizeof order, &arg, &arg_len)) {
        mote_reject("c_journal: not a Journal order");
        return NULL;
    }
    uint64_t value, from, n;
    if (!strcmp(order, "Append") && mote_text_to_u64(arg, arg_len, &value)) return append(value);
    if (!strcmp(order, "AppendRange") && mote_json_u64(arg, arg_len, "from", &from) &&
        mote_json_u64(arg, arg_len, "count", &n)) {
        const char *error = NULL;
        for (uint64_t v = from; v < from + n && !error; v++) error = append(v);
        return error;
    }
    if (!strcmp(order, "Query")) return mote_sender() ? query() : NULL;
    if (!strcmp(order, "Forget")) {
        MOTE_TRY(mote_delete_state());
        mote_stop_self();
        return NULL;
    }
    if (!strcmp(order, "Crash")) __builtin_trap();
    mote_reject("c_journal: a Journal order it does not know, or a bad value");
    return NULL;
}
