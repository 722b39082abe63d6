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

/* A behaviour: handles messages instead of `mote_receive` while it is on top of the stack
 * (`mote_become`), with the same contract. */
typedef const char *(*mote_behavior_fn)(const mote_msg_t *msg);

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

/* Frees an address the SDK returned (mote_myself, mote_parent, mote_spawn*, mote_resolve). */
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
/* Passes the message on to `to` (or `path`) with its original sender. */
bool mote_forward(const mote_address_t *to, const char *kind, const void *body, size_t len);
bool mote_forward_path(const char *path, const char *kind, const void *body, size_t len);
/* Like `mote_tell`/`mote_tell_path`, on the receiver's urgent lane (served first). */
bool mote_tell_urgent(const mote_address_t *to, const char *kind, const void *body, size_t len);
bool mote_tell_urgent_path(const char *path, const char *kind, const void *body, size_t len);
/* Inside `mote_receive`: the message becomes a dead letter with this reason. */
void mote_reject(const char *reason);

/* ---- Asks ---- */

/* The kind of the message that says an ask got no reply in time. */
#define MOTE_ASK_TIMEOUT "mote.ask-timeout"
/* The path prefix of the sender of an ask's request, reply and timeout: `/system/ask/<id>`. */
#define MOTE_ASK_PREFIX "/system/ask/"

/* Asks the actor at the absolute `path` (`id` gets the ask id); its reply, or else a timeout
 * after `timeout_ms`, comes back later as a message: see the two functions below. */
bool mote_ask(const char *path, const char *kind, const void *body, size_t len,
              uint64_t timeout_ms, uint64_t *id);
/* True when `msg` comes from an ask endpoint and is not a timeout: the reply to the ask `id`.
 * A request asked of this actor has such a sender too (whose reply goes back to the asker):
 * an actor that asks and answers tells them apart by the ids `mote_ask` gave it. */
bool mote_is_answer(const mote_msg_t *msg, uint64_t *id);
/* True when `msg` says the ask `id` got no reply within its deadline. */
bool mote_is_ask_timeout(const mote_msg_t *msg, uint64_t *id);

/* ---- Topics and groups ---- */

/* Receives every message published to `topic` from now on, until `mote_unsubscribe`. */
bool mote_subscribe(const char *topic);
void mote_unsubscribe(const char *topic);
/* Sends to every subscriber of `topic` (`reached` gets how many; may be NULL). */
bool mote_publish(const char *topic, const char *kind, const void *body, size_t len,
                  uint32_t *reached);
/* Joins (leaves) the named group. */
bool mote_join(const char *group);
void mote_leave(const char *group);
/* Sends to the member of `group` with the shortest mailbox (`delivered`: false if empty). */
bool mote_tell_group(const char *group, const char *kind, const void *body, size_t len,
                     bool *delivered);
/* Sends to every member of `group` (`reached` gets how many; may be NULL). */
bool mote_broadcast_group(const char *group, const char *kind, const void *body, size_t len,
                          uint32_t *reached);

/* ---- Behaviours and the stash: requests applied when the hook returns NULL ----
 *
 * As in the Rust and Python SDKs, `mote_become`, `mote_unbecome`, `mote_stash` and
 * `mote_unstash_all` take effect, in call order, once the hook (start, receive, a behaviour,
 * migrate or supervise) returns NULL: a hook that fails changes neither the behaviours nor the
 * stash. So the next message, not the current one, meets the new behaviour. */

/* Pushes `behavior`: the next messages go to it instead of `mote_receive`. */
void mote_become(mote_behavior_fn behavior);
/* Pops the top behaviour (back to the one below, or `mote_receive`); none: does nothing. */
void mote_unbecome(void);
/* Sets the message being handled aside, with its sender, for `mote_unstash_all`. Outside a
 * message it is ignored with a warning; past the stash quota the message is rejected. */
void mote_stash(void);
/* Has every stashed message handled again, in order, before any message still queued. */
void mote_unstash_all(void);
/* How many messages are stashed (unstashed ones not yet handled included). */
uint32_t mote_stashed(void);
/* A copy of the oldest stashed message of `kind` (any kind for NULL), left in the stash; NULL
 * if there is none. Free it with `mote_msg_free`. Each call scans the stash. */
mote_msg_t *mote_peek(const char *kind);
/* Takes the oldest stashed message of `kind` (any kind for NULL) out of the stash, at once:
 * this hook handles it too (a durable one is acknowledged with this hook's step; if the hook
 * fails, it is dropped with the hook's own message). NULL if there is none; free it with
 * `mote_msg_free`. `mote_reply` still answers the sender of the message being handled. */
mote_msg_t *mote_take(const char *kind);
/* Frees a message from `mote_peek` or `mote_take` (never one a hook was handed). */
void mote_msg_free(mote_msg_t *msg);

/* ---- Lookup and the clock ---- */

/* The live actor at `path` (absolute or relative), into `address` (free it with
 * `mote_address_free`); false if none lives there. */
bool mote_resolve(const char *path, mote_address_t *address);
/* The messages waiting for the live actor at `path`, into `depth`; false if none lives here. */
bool mote_mailbox_depth(const char *path, uint32_t *depth);
/* This actor's live children: an array of `*count` addresses (NULL if none), freed with
 * `mote_children_free`. */
void mote_children(mote_address_t **children, size_t *count);
void mote_children_free(mote_address_t *children, size_t count);
/* Nanoseconds since this actor was spawned (a restart or an upgrade keeps counting). */
uint64_t mote_since_start(void);
/* Nanoseconds this actor's calls have been running so far. */
uint64_t mote_cpu_time(void);

/* ---- Children and supervision ---- */

bool mote_spawn(const char *name, const char *module, const void *init, size_t len,
                mote_address_t *child);

/* Per-child limits for `mote_spawn_with`/`mote_spawn_on`: a field left 0 takes the parent's
 * own, and a child never gets more than its parent (a larger value is capped). */
typedef struct mote_limits {
    uint32_t mailbox_capacity; /* messages its mailbox holds before sends are refused */
    uint64_t memory_limit;     /* bytes of linear memory it may grow to */
    uint64_t cpu_deadline_ms;  /* milliseconds of CPU one message may take */
    uint64_t mailbox_bytes;    /* bytes of queued bodies before sends are refused */
    uint32_t descendants;      /* live descendants it may have (MOTE_NO_DESCENDANTS: none) */
} mote_limits_t;

/* `mote_limits_t.descendants` for a child that may spawn no actor at all (0 is the parent's). */
#define MOTE_NO_DESCENDANTS UINT32_MAX

/* Like `mote_spawn`, with per-child limits (`limits` NULL: all the parent's). */
bool mote_spawn_with(const char *name, const char *module, const void *init, size_t len,
                     const mote_limits_t *limits, mote_address_t *child);
/* Like `mote_spawn_with`, on the node `node` of the host's cluster (refused, "instantiation
 * failed", when no live node has that name); this actor supervises it across the network. */
bool mote_spawn_on(const char *node, const char *name, const char *module, const void *init,
                   size_t len, const mote_limits_t *limits, mote_address_t *child);
void mote_stop(const mote_address_t *target);
void mote_stop_self(void);
bool mote_watch(const mote_address_t *target);
void mote_unwatch(const mote_address_t *target);
/* Inside `mote_start`: why this instance replaces a failed one (malloc'd), NULL on a first start. */
char *mote_restart_cause(void);
/* Pauses a child: its messages queue, in order, until `mote_activate`; host signals still
 * reach it. Both return false if `child` is not a live child of this actor. */
bool mote_deactivate(const mote_address_t *child);
bool mote_activate(const mote_address_t *child);

typedef mote_actor_types_strategy_t mote_strategy_t;
/* One-for-one (or all-for-one) with `directive`, 10 restarts a minute, no backoff. */
mote_strategy_t mote_one_for_one(mote_directive_t directive);
mote_strategy_t mote_all_for_one(mote_directive_t directive);
void mote_set_strategy(const mote_strategy_t *strategy);

/* ---- Timers (die with the actor) ---- */

/* `kind`/`body` to `to` after `delay_ms`, then every `period_ms` unless 0 (this actor is the
 * sender); `id` (may be NULL) gets the timer's id for `mote_cancel_timer`. */
bool mote_schedule(const mote_address_t *to, const char *kind, const void *body, size_t len,
                   uint64_t delay_ms, uint64_t period_ms, uint64_t *id);
/* `mote_schedule` to this actor. */
bool mote_schedule_self(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                        uint64_t period_ms, uint64_t *id);
bool mote_cancel_timer(uint64_t id);

/* ---- Naming: aliases, second names reached and resolved like any path ---- */

/* Gives this actor the second name `/system/alias/<name>` until it stops or unaliases it;
 * `path` (may be NULL) gets that path, malloc'd and NUL-terminated, for the caller to free.
 * Refused for an invalid or taken name, or past the actor's quota of aliases. */
bool mote_alias(const char *name, char **path);
/* Gives up the alias `name`; false if this actor holds none of that name. */
bool mote_unalias(const char *name);

/* ---- Delivery: what a host crash may do to the durable messages a non-persistent actor
 * receives (a persistent one acknowledges them with its state, exactly once) ---- */

typedef enum mote_delivery_mode {
    /* Acknowledged after it was handled: after a crash it may come again (the default). */
    MOTE_AT_LEAST_ONCE = MOTE_ACTOR_DELIVERY_DELIVERY_MODE_AT_LEAST_ONCE,
    /* Acknowledged durably before it is handled: after a crash never again, maybe lost. */
    MOTE_AT_MOST_ONCE = MOTE_ACTOR_DELIVERY_DELIVERY_MODE_AT_MOST_ONCE,
} mote_delivery_t;

/* Sets the mode for the durable messages this actor receives from now on (typically in
 * `mote_start`); it holds across restarts until changed. */
void mote_set_delivery(mote_delivery_t mode);
/* This actor's mode. */
mote_delivery_t mote_delivery(void);

/* ---- HTTP call-outs: a request runs outside the actor; its outcome comes back as a message.
 * Only a module deployed with the grant `wasi:http` may start one. ---- */

/* A header: name and value, NUL-terminated. */
typedef struct mote_http_header {
    const char *name;
    const char *value;
} mote_http_header_t;

/* An outgoing request (borrowed: the host copies it). */
typedef struct mote_http_request {
    const char *method; /* "GET", "POST", ... */
    const char *url;    /* an absolute http:// or https:// URL */
    const mote_http_header_t *headers;
    size_t header_count;
    const void *body; /* NULL with body_len 0: none */
    size_t body_len;
    uint64_t timeout_ms; /* the most the whole exchange may take; 0: the host's maximum */
} mote_http_request_t;

/* A response, read whole; free it with `mote_http_response_free`. */
typedef struct mote_http_response {
    uint16_t status;
    mote_http_header_t *headers;
    size_t header_count;
    uint8_t *body;
    size_t body_len;
} mote_http_response_t;

/* The kind of the message that says a call-out ended (no sender; body: its id, u64 LE). */
#define MOTE_HTTP_RESPONSE "mote.http.response"

/* Starts `request` and returns at once; `id` gets the call-out's id. Refused when the module is
 * not granted `wasi:http`, for a bad URL or request, or past the actor's call-out quota. */
bool mote_http_request(const mote_http_request_t *request, uint64_t *id);
/* True when `msg` says the call-out `id` ended: take its outcome with `mote_http_response`. */
bool mote_is_http_response(const mote_msg_t *msg, uint64_t *id);
/* Takes the outcome of call-out `id`, once: true with the response in `response`; false when
 * the exchange failed (`mote_last_error()`: timeout, failed, too large...) or there is no
 * outcome (still in flight, already taken, or not this actor's). */
bool mote_http_response(uint64_t id, mote_http_response_t *response);
/* The value of the first header named `name` (ASCII case-insensitive), NULL if none. */
const char *mote_http_header(const mote_http_response_t *response, const char *name);
void mote_http_response_free(mote_http_response_t *response);

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
/* The key of this actor's durable state (malloc'd): its path unless `mote_set_persistence_id`
 * chose another, with the host's owner scope in front (`<scope>:<id>`). */
char *mote_persistence_id(void);
/* Chooses another persistence id, stable across restarts; only before `mote_recover`. */
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

/* The variant of an enum as serde writes it in JSON (the example protocol's orders): a unit
 * variant is a string, `"Get"`; one with data an object of one field, `{"Add": 5}` or
 * `{"Once": {"delay_ms": 100, "tag": 1}}`. True when `json` is either and the name fits `cap`
 * bytes with its NUL: `name` gets it, `value`/`value_len` the data's JSON text (`5`; empty for a
 * unit variant). */
bool mote_json_variant(const uint8_t *json, size_t len, char *name, size_t cap,
                       const uint8_t **value, size_t *value_len);

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
