/* c_raw: `c_counter`'s `get` answered straight on the bindings wit-bindgen's C generator
 * writes, without the SDK (the build links no mote.c into c_raw*): the baseline
 * `mote-bench languages` measures the C SDK's per-call overhead against. `add` "5" adds 5;
 * `get` replies `total` with the sum as text.
 */
#include <stdlib.h>
#include <string.h>

#include "mote_world.h"

static uint64_t total;

static bool is(const mote_world_string_t *kind, const char *name) {
    size_t n = strlen(name);
    return kind->len == n && memcmp(kind->ptr, name, n) == 0;
}

bool exports_mote_actor_actor_start(mote_world_list_u8_t *init, mote_world_string_t *err) {
    (void)err;
    mote_world_list_u8_free(init);
    total = 0;
    return true;
}

bool exports_mote_actor_actor_receive(exports_mote_actor_actor_message_t *msg,
                                      mote_world_string_t *err) {
    (void)err;
    if (is(&msg->kind, "add")) {
        uint64_t n = 0;
        for (size_t i = 0; i < msg->body.len && msg->body.ptr[i] >= '0' && msg->body.ptr[i] <= '9'; i++)
            n = n * 10 + (uint64_t)(msg->body.ptr[i] - '0');
        total += n;
    } else if (is(&msg->kind, "get") && msg->sender.is_some) {
        char digits[21];
        size_t len = 0;
        uint64_t v = total;
        do {
            digits[sizeof digits - 1 - len++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        mote_world_string_t kind;
        mote_world_string_set(&kind, "total");
        mote_world_list_u8_t body = {(uint8_t *)digits + sizeof digits - len, len};
        mote_actor_host_send_error_t error;
        if (!mote_actor_host_tell(&msg->sender.val, &kind, &body, &error))
            mote_actor_host_send_error_free(&error);
    }
    exports_mote_actor_actor_message_free(msg);
    return true;
}

void exports_mote_actor_actor_stopping(exports_mote_actor_actor_stop_reason_t *reason) {
    exports_mote_actor_actor_stop_reason_free(reason);
}

bool exports_mote_actor_supervisor_supervise(exports_mote_actor_supervisor_address_t *child,
                                             exports_mote_actor_supervisor_failure_kind_t kind,
                                             mote_world_string_t *error,
                                             exports_mote_actor_supervisor_directive_t *ret) {
    (void)kind;
    (void)ret;
    exports_mote_actor_supervisor_address_free(child);
    mote_world_string_free(error);
    return false;
}

bool exports_mote_actor_upgrade_save_state(mote_world_list_u8_t *ret) {
    (void)ret;
    return false;
}

bool exports_mote_actor_upgrade_migrate(mote_world_string_t *from_version,
                                        mote_world_list_u8_t *state, mote_world_string_t *err) {
    mote_world_string_free(from_version);
    mote_world_list_u8_free(state);
    mote_world_string_dup(err, "c_raw keeps no state");
    return false;
}
