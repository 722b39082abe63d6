/* The versioned counter in C, the C twin of the Rust `versioned-v1..v3`: one source for the
 * three versions `c_versioned_v1.c`, `_v2.c` and `_v3.c`, each of which defines VERSION (and v3
 * BAD_MIGRATE) before including it.
 *
 * - `add` "<n>" (a JSON number) counts n: count, sum, the last n, and how many arrived out of
 *   order (not the last one plus 1);
 * - `get` replies `state` {"version":V,"count":..,"sum":..,"last":..,"out_of_order":..,
 *   "migrated_from":".."};
 * - `crash` traps.
 * In a hot swap it carries count, sum, last and out_of_order (4 x u64 little-endian); the new
 * version notes the old one's in `migrated_from`. With BAD_MIGRATE, `mote_migrate` traps: an
 * upgrade to that version that carries state fails and the old instance keeps running.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static uint64_t fields[4]; /* count, sum, last, out_of_order */
static char migrated_from[32];

#define COUNT fields[0]
#define SUM fields[1]
#define LAST fields[2]
#define OUT_OF_ORDER fields[3]

const char *mote_start(const uint8_t *init, size_t init_len) {
    (void)init;
    (void)init_len;
    memset(fields, 0, sizeof fields);
    migrated_from[0] = 0;
    return NULL;
}

static const char *get(void) {
    mote_buf_t body = {0};
    const char *names[] = {"count", "sum", "last", "out_of_order"};
    mote_buf_str(&body, "{\"version\":");
    mote_buf_u64(&body, VERSION);
    for (size_t i = 0; i < 4; i++) {
        mote_buf_str(&body, ",\"");
        mote_buf_str(&body, names[i]);
        mote_buf_str(&body, "\":");
        mote_buf_u64(&body, fields[i]);
    }
    mote_buf_str(&body, ",\"migrated_from\":\"");
    mote_buf_str(&body, migrated_from);
    mote_buf_str(&body, "\"}");
    bool sent = mote_reply("state", body.data, body.len);
    mote_buf_free(&body);
    return sent ? NULL : mote_last_error();
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "add")) {
        uint64_t n;
        if (!mote_text_to_u64(msg->body, msg->body_len, &n)) return "add: not a JSON number";
        if (COUNT > 0 && n != LAST + 1) OUT_OF_ORDER++;
        COUNT++;
        SUM += n;
        LAST = n;
        return NULL;
    }
    if (mote_is(msg, "get")) return mote_sender() ? get() : NULL;
    if (mote_is(msg, "crash")) __builtin_trap();
    return NULL;
}

bool mote_save_state(uint8_t **state, size_t *state_len) {
    uint8_t *bytes = malloc(sizeof fields);
    for (size_t i = 0; i < 4; i++)
        for (size_t b = 0; b < 8; b++) bytes[i * 8 + b] = (uint8_t)(fields[i] >> (8 * b));
    *state = bytes;
    *state_len = sizeof fields;
    return true;
}

const char *mote_migrate(const char *from_version, const uint8_t *state, size_t state_len) {
#ifdef BAD_MIGRATE
    (void)from_version;
    (void)state;
    (void)state_len;
    __builtin_trap(); /* the deliberate bug of this version */
#else
    if (state_len != sizeof fields) return "migrate: the state is not 4 x u64";
    for (size_t i = 0; i < 4; i++) {
        fields[i] = 0;
        for (size_t b = 0; b < 8; b++) fields[i] |= (uint64_t)state[i * 8 + b] << (8 * b);
    }
    size_t n = strlen(from_version);
    if (n >= sizeof migrated_from) n = sizeof migrated_from - 1;
    memcpy(migrated_from, from_version, n);
    migrated_from[n] = 0;
    return NULL;
#endif
}
