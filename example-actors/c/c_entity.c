/* c_entity: a virtual actor in C, a durable counter named by its entity id, the C twin of the
 * Rust `entity`.
 *
 * Init: the entity id (the host hands it over and keys the state by it). Each start recovers
 * the snapshot, counts one more activation and saves a snapshot.
 * - `add` "<k>" (a JSON number) adds k to the total and saves a snapshot;
 * - `get` replies `value` {"id":"..","total":..,"activations":..};
 * - `retire` deletes its durable state and stops it (the next activation starts afresh);
 * - `stop` stops it, keeping its state.
 * When the host shuts down, `mote_stopping` saves a snapshot once more (Dust's isInShutdown
 * pattern; redundant here, as every change is saved at once).
 *
 * The snapshot is total and activations, 2 x u64 little-endian.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static char *id;
static uint64_t total, activations;
static bool retired;

static void on_snapshot(void *state, const uint8_t *data, size_t len) {
    (void)state;
    if (len != 16) return;
    total = activations = 0;
    for (int b = 7; b >= 0; b--) {
        total = total << 8 | data[b];
        activations = activations << 8 | data[8 + b];
    }
}

static bool save(void) {
    uint8_t snapshot[16];
    for (int b = 0; b < 8; b++) {
        snapshot[b] = (uint8_t)(total >> (8 * b));
        snapshot[8 + b] = (uint8_t)(activations >> (8 * b));
    }
    return mote_save_snapshot(snapshot, sizeof snapshot, NULL);
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    while (init_len && (init[init_len - 1] == ' ' || init[init_len - 1] == '\n')) init_len--;
    if (init_len == 0) return "missing init argument <entity-id>";
    id = malloc(init_len + 1);
    memcpy(id, init, init_len);
    id[init_len] = 0;
    total = activations = 0;
    retired = false;
    MOTE_TRY(mote_recover(NULL, on_snapshot, NULL, NULL));
    activations++;
    MOTE_TRY(save());
    return NULL;
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "add")) {
        uint64_t k;
        if (!mote_text_to_u64(msg->body, msg->body_len, &k)) return "add: not a JSON number";
        total += k;
        MOTE_TRY(save());
    } else if (mote_is(msg, "get")) {
        if (!mote_sender()) return NULL;
        mote_buf_t body = {0};
        mote_buf_str(&body, "{\"id\":\"");
        mote_buf_str(&body, id);
        mote_buf_str(&body, "\",\"total\":");
        mote_buf_u64(&body, total);
        mote_buf_str(&body, ",\"activations\":");
        mote_buf_u64(&body, activations);
        mote_buf_str(&body, "}");
        bool sent = mote_reply("value", body.data, body.len);
        mote_buf_free(&body);
        if (!sent) return mote_last_error();
    } else if (mote_is(msg, "retire")) {
        MOTE_TRY(mote_delete_state());
        retired = true;
        mote_stop_self();
    } else if (mote_is(msg, "stop")) {
        mote_stop_self();
    }
    return NULL;
}

void mote_stopping(mote_stop_reason_t reason, const char *error) {
    (void)error;
    if (reason == MOTE_STOP_SHUTDOWN && mote_in_shutdown() && !retired && !save())
        mote_warn(mote_last_error());
}
