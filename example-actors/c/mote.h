/* mote.h: the C SDK of Mote, over the bindings wit-bindgen's C generator writes for the
 * `upgradable-actor-world` of wit/actor.wit (`mote_world.h`).
 *
 * An actor implements two functions, and optionally the others of "Hooks" below:
 *
 *     const char *mote_start(const uint8_t *init, size_t init_len);
 *     const char *mote_receive(const mote_msg_t *msg);
 *
 * A hook returns NULL when it succeeded, or an error message (a failure of the actor, for its
 * supervisor to decide about). `mote.c` exports them to the host.
 *
 * The functions below are the Rust SDK's `Context` with C names. Those that can be refused
 * return true on success; on refusal they return false and `mote_last_error()` says why, so a
 * hook can give up with `MOTE_TRY(mote_persist(...))`. Bodies are bytes: the C examples use
 * JSON text, the encoding every language of Mote reads (see the README).
 *
 * One call at a time, never two at once: the SDK keeps the current message in a global.
 */
#ifndef MOTE_H
#define MOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mote_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An actor's address: its path and the id of its incarnation (`path` is not NUL-terminated). */
typedef mote_actor_types_address_t mote_address_t;
typedef mote_world_string_t mote_string_t;

/* The message a `mote_receive` handles. `kind` is NUL-terminated; `body` is not. */
typedef struct mote_msg {
    const mote_address_t *sender; /* NULL when the message has no sender */
    const char *kind;
    const uint8_t *body;
    size_t body_len;
} mote_msg_t;

/* ---- Hooks: mote_start and mote_receive are required, the others optional ---- */

const char *mote_start(const uint8_t *init, size_t init_len);
const char *mote_receive(const mote_msg_t *msg);

/* Why `mote_stopping` runs. */
typedef enum mote_stop_reason {
    MOTE_STOP_NORMAL = MOTE_ACTOR_TYPES_STOP_REASON_NORMAL,
    MOTE_STOP_FAILURE = MOTE_ACTOR_TYPES_STOP_REASON_FAILURE,
    MOTE_STOP_PARENT_FAILURE = MOTE_ACTOR_TYPES_STOP_REASON_PARENT_FAILURE,
    MOTE_STOP_SHUTDOWN = MOTE_ACTOR_TYPES_STOP_REASON_SHUTDOWN,
} mote_stop_reason_t;

/* Once, when the actor stops; `error` is the failure's text (NULL for normal and shutdown). */
void mote_stopping(mote_stop_reason_t reason, const char *error);

typedef enum mote_directive {
    MOTE_DEFER = -1, /* let the strategy decide */
    MOTE_RESUME = MOTE_ACTOR_TYPES_DIRECTIVE_RESUME,
    MOTE_RESTART = MOTE_ACTOR_TYPES_DIRECTIVE_RESTART,
    MOTE_STOP = MOTE_ACTOR_TYPES_DIRECTIVE_STOP,
    MOTE_ESCALATE = MOTE_ACTOR_TYPES_DIRECTIVE_ESCALATE,
} mote_directive_t;

typedef mote_actor_types_failure_kind_t mote_failure_kind_t;
#define MOTE_FAILURE_TRAP MOTE_ACTOR_TYPES_FAILURE_KIND_TRAP
#define MOTE_FAILURE_ERROR MOTE_ACTOR_TYPES_FAILURE_KIND_ERROR

/* A child failed: what to do about it (`MOTE_DEFER`: the strategy's directive). */
mote_directive_t mote_supervise(const mote_address_t *child, mote_failure_kind_t kind,
                                const char *error);

/* Hot swap. `mote_save_state` returns the state to carry to the new version (a buffer from
 * malloc, which the SDK frees) or false to start it afresh; `mote_migrate` runs on the new
 * version instead of `mote_start`. */
bool mote_save_state(uint8_t **state, size_t *state_len);
const char *mote_migrate(const char *from_version, const uint8_t *state, size_t state_len);

/* ---- Errors ---- */

/* Why the last call that returned false was refused (a static buffer). */
const char *mote_last_error(void);

/* Returns the last error from the calling hook when `call` returns false. */
#define MOTE_TRY(call)                                                                        \
    do {                                                                                      \
        if (!(call)) return mote_last_error();                                                \
    } while (0)

/* ---- Addresses and messages ---- */

/* Frees an address the SDK returned (mote_myself, mote_parent, mote_spawn). */
void mote_address_free(mote_address_t *address);
mote_address_t mote_myself(void);
bool mote_parent(mote_address_t *out);
/* The sender of the message being handled, NULL if none. */
const mote_address_t *mote_sender(void);
/* True when the message is of `kind`. */
bool mote_is(const mote_msg_t *msg, const char *kind);
/* True when the address's path is `path`. */
bool mote_path_is(const mote_address_t *address, const char *path);

bool mote_tell(const mote_address_t *to, const char *kind, const void *body, size_t len);
bool mote_tell_path(const char *path, const char *kind, const void *body, size_t len);
/* Answers the sender of the message being handled (an ask too); refused without one. */
bool mote_reply(const char *kind, const void *body, size_t len);
/* Passes the message on to `path` with its original sender. */
bool mote_forward_path(const char *path, const char *kind, const void *body, size_t len);
/* Inside `mote_receive`: the message becomes a dead letter with this reason. */
void mote_reject(const char *reason);

/* ---- Children and supervision ---- */

bool mote_spawn(const char *name, const char *module, const void *init, size_t len,
                mote_address_t *child);
void mote_stop(const mote_address_t *target);
void mote_stop_self(void);
bool mote_watch(const mote_address_t *target);
void mote_unwatch(const mote_address_t *target);
/* Inside `mote_start`: why this instance replaces a failed one (malloc'd), NULL on a first start. */
char *mote_restart_cause(void);

typedef mote_actor_types_strategy_t mote_strategy_t;
/* One-for-one (or all-for-one) with `directive`, 10 restarts a minute, no backoff. */
mote_strategy_t mote_one_for_one(mote_directive_t directive);
mote_strategy_t mote_all_for_one(mote_directive_t directive);
void mote_set_strategy(const mote_strategy_t *strategy);

/* ---- Timers (die with the actor) ---- */

/* `kind`/`body` to this actor after `delay_ms`, then every `period_ms` unless 0. */
bool mote_schedule_self(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                        uint64_t period_ms, uint64_t *id);
bool mote_cancel_timer(uint64_t id);

/* ---- Persistence ---- */

/* How `mote_recover` went. */
typedef struct mote_recovery {
    bool from_snapshot;
    uint64_t snapshot_seq;
    uint64_t replayed;
    uint64_t last_seq;
} mote_recovery_t;

/* Called with the snapshot (at most once), then with each event after it, in order. */
typedef void (*mote_snapshot_fn)(void *state, const uint8_t *data, size_t len);
typedef void (*mote_event_fn)(void *state, uint64_t seq, const uint8_t *data, size_t len);

/* Makes this actor persistent and folds its snapshot and events into `state` (Rust's
 * `ctx.recover()?.fold(...)`); either callback may be NULL. */
bool mote_recover(void *state, mote_snapshot_fn on_snapshot, mote_event_fn on_event,
                  mote_recovery_t *recovery);
bool mote_set_persistence_id(const char *id);
bool mote_persist(const void *event, size_t len, uint64_t *seq);
bool mote_save_snapshot(const void *state, size_t len, uint64_t *seq);
bool mote_delete_events(uint64_t through);
bool mote_delete_state(void);
bool mote_in_shutdown(void);
/* A durable timer: `kind`/`body` after `delay_ms` (then every `period_ms` unless 0), also
 * after a host restart. */
bool mote_remind(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                 uint64_t period_ms, uint64_t *id);
bool mote_cancel_reminder(uint64_t id);

/* ---- Logging ---- */

typedef enum mote_log_level {
    MOTE_TRACE = MOTE_ACTOR_TYPES_LOG_LEVEL_TRACE,
    MOTE_DEBUG = MOTE_ACTOR_TYPES_LOG_LEVEL_DEBUG,
    MOTE_INFO = MOTE_ACTOR_TYPES_LOG_LEVEL_INFO,
    MOTE_WARN = MOTE_ACTOR_TYPES_LOG_LEVEL_WARN,
    MOTE_ERROR = MOTE_ACTOR_TYPES_LOG_LEVEL_ERROR,
} mote_log_level_t;

void mote_log(mote_log_level_t level, const char *text);
#define mote_debug(text) mote_log(MOTE_DEBUG, text)
#define mote_info(text) mote_log(MOTE_INFO, text)
#define mote_warn(text) mote_log(MOTE_WARN, text)

/* ---- Text helpers for JSON-ish bodies ---- */

/* Writes `value` in decimal to `out` (at least 21 bytes), NUL-terminated; returns its length. */
size_t mote_u64_to_text(uint64_t value, char *out);
/* Parses a decimal u64 from `text` (leading blanks allowed); false if there is none. */
bool mote_text_to_u64(const uint8_t *text, size_t len, uint64_t *value);

/* Finds `"field": <number>` in a JSON object and parses the number (no nesting, no escapes:
 * enough for flat bodies such as {"n": 5}); false if it is not there. */
bool mote_json_u64(const uint8_t *json, size_t len, const char *field, uint64_t *value);

/* A growable byte buffer (malloc'd), to build bodies and snapshots. */
typedef struct mote_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} mote_buf_t;

void mote_buf_push(mote_buf_t *buf, const void *bytes, size_t len);
void mote_buf_str(mote_buf_t *buf, const char *text);
void mote_buf_u64(mote_buf_t *buf, uint64_t value);
void mote_buf_free(mote_buf_t *buf);

#ifdef __cplusplus
}
#endif

#endif
