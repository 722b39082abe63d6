/* c_entity: the entity of `example-actors/entity` in C: a virtual actor (init: its id), a
 * durable counter whose total lives in a snapshot, so it passivates and comes back, even after
 * a host restart, with it. Each start recovers the snapshot, counts one more activation and
 * saves a snapshot.
 *
 * It speaks the example protocol's `Entity` in JSON (kind `Entity`), as the Python and
 * JavaScript ports do: {"Add":k} adds k to the total and saves a snapshot; "Get" replies an
 * `EntityValue` {"id":"..","total":..,"activations":..}; "Retire" deletes its durable state and
 * stops it (the next activation starts afresh); "Stop" stops it, keeping its state. Anything
 * else is a dead letter. When the host shuts down, `mote_stopping` saves a snapshot once more
 * (Dust's isInShutdown pattern; redundant here, as every change is saved at once).
 *
 * The snapshot is total and activations, 2 x u64 little-endian.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"
#include "protocol.h"

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

static const char *get(void) {
    if (!mote_sender()) return NULL;
    mote_buf_t body = {0};
    mote_buf_str(&body, "{\"id\":\"");
    mote_buf_str(&body, id);
    mote_buf_str(&body, "\",\"total\":");
    mote_buf_u64(&body, total);
    mote_buf_str(&body, ",\"activations\":");
    mote_buf_u64(&body, activations);
    mote_buf_str(&body, "}");
    return reply_json("EntityValue", &body);
}

const char *mote_receive(const mote_msg_t *msg) {
    char order[16];
    const uint8_t *arg;
    size_t arg_len;
    if (!mote_is(msg, "Entity") ||
        !mote_json_variant(msg->body, msg->body_len, order, sizeof order, &arg, &arg_len)) {
        mote_reject("c_entity: not an Entity order");
        return NULL;
    }
    uint64_t k;
    if (!strcmp(order, "Add") && mote_text_to_u64(arg, arg_len, &k)) {
        total += k;
        MOTE_TRY(save());
        return NULL;
    }
    if (!strcmp(order, "Get")) return get();
    if (!strcmp(order, "Retire")) {
        MOTE_TRY(mote_delete_state());
        retired = true;
        mote_stop_self();
        return NULL;
    }
    if (!strcmp(order, "Stop")) {
        mote_stop_self();
        return NULL;
    }
    mote_reject("c_entity: an Entity order it does not know, or a bad value");
    return NULL;
}

void mote_stopping(mote_stop_reason_t reason, const char *error) {
    (void)error;
    if (reason == MOTE_STOP_SHUTDOWN && mote_in_shutdown() && !retired && !save())
        mote_warn(mote_last_error());
}
