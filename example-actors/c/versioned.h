/* The versioned counter of the hot swap tests in C (`VersionedCounter` in example-actors/protocol):
 * one source for the three versions `c_versioned_v1.c`, `_v2.c` and `_v3.c`, each of which
 * defines VERSION (and v3 BAD_MIGRATE) before including it.
 *
 * It speaks the example protocol's `Versioned` in JSON (kind `Versioned`), as the Python and
 * JavaScript ports do: {"Add":{"stream":1,"n":5}} counts n on its stream (count, sum, the last
 * value per stream, and how many arrived out of order: not one more than the stream's last, or
 * not 0 for a stream's first); "Get" replies a `VersionedState` {"version":V,"count":..,"sum":..,
 * "last":[[stream,n],...],"out_of_order":..,"migrated_from":".."}; "Crash" traps. Anything else
 * is a dead letter.
 *
 * In a hot swap it carries count, sum, out_of_order, the number of streams and each stream's
 * (stream, last) as u64 little-endian; the new version notes the old one's in `migrated_from`.
 * With BAD_MIGRATE, `mote_migrate` traps: an upgrade to that version that carries state fails
 * and the old instance keeps running.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"
#include "protocol.h"

#define MAX_STREAMS 16

static uint64_t count, sum, out_of_order;
static struct {
    uint64_t stream, last;
} streams[MAX_STREAMS]; /* sorted by stream */
static size_t stream_count;
static char migrated_from[32];

const char *mote_start(const uint8_t *init, size_t init_len) {
    (void)init;
    (void)init_len;
    count = sum = out_of_order = 0;
    stream_count = 0;
    migrated_from[0] = 0;
    return NULL;
}

/* Counts `n` on `stream`, as `VersionedCore::add` does. */
static const char *add(uint64_t stream, uint64_t n) {
    size_t i = 0;
    while (i < stream_count && streams[i].stream < stream) i++;
    if (i < stream_count && streams[i].stream == stream) {
        if (n != ((streams[i].last + 1) & 0xFFFFFFFF)) out_of_order++;
    } else {
        if (stream_count == MAX_STREAMS) return "too many streams";
        memmove(&streams[i + 1], &streams[i], (stream_count - i) * sizeof *streams);
        stream_count++;
        streams[i].stream = stream;
        if (n != 0) out_of_order++;
    }
    streams[i].last = n;
    count++;
    sum += n;
    return NULL;
}

static const char *get(void) {
    mote_buf_t body = {0};
    mote_buf_str(&body, "{\"version\":");
    mote_buf_u64(&body, VERSION);
    mote_buf_str(&body, ",\"count\":");
    mote_buf_u64(&body, count);
    mote_buf_str(&body, ",\"sum\":");
    mote_buf_u64(&body, sum);
    mote_buf_str(&body, ",\"last\":[");
    for (size_t i = 0; i < stream_count; i++) {
        mote_buf_str(&body, i ? ",[" : "[");
        mote_buf_u64(&body, streams[i].stream);
        mote_buf_str(&body, ",");
        mote_buf_u64(&body, streams[i].last);
        mote_buf_str(&body, "]");
    }
    mote_buf_str(&body, "],\"out_of_order\":");
    mote_buf_u64(&body, out_of_order);
    mote_buf_str(&body, ",\"migrated_from\":\"");
    mote_buf_str(&body, migrated_from);
    mote_buf_str(&body, "\"}");
    return reply_json("VersionedState", &body);
}

const char *mote_receive(const mote_msg_t *msg) {
    char order[16];
    const uint8_t *arg;
    size_t arg_len;
    if (!mote_is(msg, "Versioned") ||
        !mote_json_variant(msg->body, msg->body_len, order, sizeof order, &arg, &arg_len)) {
        mote_reject("c_versioned: not a Versioned order");
        return NULL;
    }
    uint64_t stream, n;
    if (!strcmp(order, "Add") && mote_json_u64(arg, arg_len, "stream", &stream) &&
        mote_json_u64(arg, arg_len, "n", &n))
        return add(stream, n);
    if (!strcmp(order, "Get")) return mote_sender() ? get() : NULL;
    if (!strcmp(order, "Crash")) __builtin_trap();
    mote_reject("c_versioned: a Versioned order it does not know, or a bad value");
    return NULL;
}

static void put_u64(uint8_t *bytes, uint64_t v) {
    for (size_t b = 0; b < 8; b++) bytes[b] = (uint8_t)(v >> (8 * b));
}

#ifndef BAD_MIGRATE
static uint64_t get_u64(const uint8_t *bytes) {
    uint64_t v = 0;
    for (size_t b = 0; b < 8; b++) v |= (uint64_t)bytes[b] << (8 * b);
    return v;
}
#endif

bool mote_save_state(uint8_t **state, size_t *state_len) {
    size_t len = 8 * (4 + 2 * stream_count);
    uint8_t *bytes = malloc(len);
    if (!bytes) abort();
    put_u64(bytes, count);
    put_u64(bytes + 8, sum);
    put_u64(bytes + 16, out_of_order);
    put_u64(bytes + 24, stream_count);
    for (size_t i = 0; i < stream_count; i++) {
        put_u64(bytes + 32 + 16 * i, streams[i].stream);
        put_u64(bytes + 40 + 16 * i, streams[i].last);
    }
    *state = bytes;
    *state_len = len;
    return true;
}

const char *mote_migrate(const char *from_version, const uint8_t *state, size_t state_len) {
#ifdef BAD_MIGRATE
    (void)from_version;
    (void)state;
    (void)state_len;
    __builtin_trap(); /* the deliberate bug of this version */
#else
    if (state_len < 32) return "migrate: the state is too short";
    uint64_t carried = get_u64(state + 24);
    if (carried > MAX_STREAMS || state_len != 8 * (4 + 2 * carried))
        return "migrate: the state's streams do not add up";
    count = get_u64(state);
    sum = get_u64(state + 8);
    out_of_order = get_u64(state + 16);
    stream_count = (size_t)carried;
    for (size_t i = 0; i < stream_count; i++) {
        streams[i].stream = get_u64(state + 32 + 16 * i);
        streams[i].last = get_u64(state + 40 + 16 * i);
    }
    size_t n = strlen(from_version);
    if (n >= sizeof migrated_from) n = sizeof migrated_from - 1;
    memcpy(migrated_from, from_version, n);
    migrated_from[n] = 0;
    return NULL;
#endif
}
