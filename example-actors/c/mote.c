/* mote.c: the C SDK of Mote (see mote.h): the exports of the world, calling the actor's hooks,
 * and the host's imports with C types. Compiled with every C actor. */
#include "mote.h"

#include <stdlib.h>
#include <string.h>

/* ---- Errors ---- */

static char last_error[256];

static void set_error(const char *what, const char *detail, size_t detail_len) {
    size_t n = 0;
    for (; what[n] && n < sizeof last_error - 1; n++) last_error[n] = what[n];
    if (detail) {
        const char *sep = ": ";
        for (size_t i = 0; sep[i] && n < sizeof last_error - 1; i++) last_error[n++] = sep[i];
        for (size_t i = 0; i < detail_len && n < sizeof last_error - 1; i++)
            last_error[n++] = detail[i];
    }
    last_error[n] = 0;
}

const char *mote_last_error(void) { return last_error; }

static const char *quota_name(mote_actor_types_quota_t quota) {
    static const char *names[] = {"timers", "timer-period", "reminders", "subscriptions",
                                  "groups", "asks", "ask-deadline", "descendants",
                                  "watches", "init-size", "aliases", "name-length"};
    return quota < sizeof names / sizeof names[0] ? names[quota] : "unknown";
}

static bool send_failed(mote_actor_types_send_error_t *err) {
    switch (err->tag) {
    case MOTE_ACTOR_TYPES_SEND_ERROR_INVALID_PATH:
        set_error("invalid path", (const char *)err->val.invalid_path.ptr,
                  err->val.invalid_path.len);
        break;
    case MOTE_ACTOR_TYPES_SEND_ERROR_TOO_LARGE:
        set_error("message too large", NULL, 0);
        break;
    case MOTE_ACTOR_TYPES_SEND_ERROR_RESERVED_KIND:
        set_error("reserved kind", (const char *)err->val.reserved_kind.ptr,
                  err->val.reserved_kind.len);
        break;
    default: {
        const char *q = quota_name(err->val.quota);
        set_error("quota", q, strlen(q));
    }
    }
    mote_actor_types_send_error_free(err);
    return false;
}

static bool persist_failed(mote_actor_persistence_persist_error_t *err) {
    static const char *names[] = {"persistence unavailable", "too large", "invalid id",
                                  "not recovered", "storage", "not owned", "quota",
                                  "reserved kind"};
    const char *what = err->tag < 8 ? names[err->tag] : "persistence refused";
    switch (err->tag) {
    case MOTE_ACTOR_PERSISTENCE_PERSIST_ERROR_INVALID_ID:
    case MOTE_ACTOR_PERSISTENCE_PERSIST_ERROR_STORAGE:
    case MOTE_ACTOR_PERSISTENCE_PERSIST_ERROR_NOT_OWNED:
    case MOTE_ACTOR_PERSISTENCE_PERSIST_ERROR_RESERVED_KIND:
        /* These cases all carry a string at the same place. */
        set_error(what, (const char *)err->val.storage.ptr, err->val.storage.len);
        break;
    case MOTE_ACTOR_PERSISTENCE_PERSIST_ERROR_QUOTA: {
        const char *q = quota_name(err->val.quota);
        set_error(what, q, strlen(q));
        break;
    }
    default:
        set_error(what, NULL, 0);
    }
    mote_actor_persistence_persist_error_free(err);
    return false;
}

/* ---- Borrowed views of C data as component-model types (no copies: the host copies) ---- */

static mote_world_string_t str_of(const char *text) {
    return (mote_world_string_t){(uint8_t *)text, text ? strlen(text) : 0};
}

static mote_world_list_u8_t bytes_of(const void *body, size_t len) {
    return (mote_world_list_u8_t){(uint8_t *)body, len};
}

/* ---- The exports ---- */

static const mote_address_t *current_sender;

static bool fail_with(const char *error, mote_world_string_t *err) {
    mote_world_string_dup(err, error);
    return false;
}

bool exports_mote_actor_actor_start(mote_world_list_u8_t *init, mote_world_string_t *err) {
    const char *error = mote_start(init->ptr, init->len);
    mote_world_list_u8_free(init);
    return error ? fail_with(error, err) : true;
}

bool exports_mote_actor_actor_receive(exports_mote_actor_actor_message_t *msg,
                                      mote_world_string_t *err) {
    char *kind = malloc(msg->kind.len + 1);
    memcpy(kind, msg->kind.ptr, msg->kind.len);
    kind[msg->kind.len] = 0;
    mote_msg_t view = {
        .sender = msg->sender.is_some ? &msg->sender.val : NULL,
        .kind = kind,
        .body = msg->body.ptr,
        .body_len = msg->body.len,
    };
    current_sender = view.sender;
    const char *error = mote_receive(&view);
    current_sender = NULL;
    bool ok = error ? fail_with(error, err) : true;
    free(kind);
    mote_actor_types_message_free(msg);
    return ok;
}

void exports_mote_actor_actor_stopping(exports_mote_actor_actor_stop_reason_t *reason) {
    char *error = NULL;
    if (reason->tag == MOTE_STOP_FAILURE || reason->tag == MOTE_STOP_PARENT_FAILURE) {
        mote_world_string_t *text = &reason->val.failure;
        error = malloc(text->len + 1);
        memcpy(error, text->ptr, text->len);
        error[text->len] = 0;
    }
    mote_stopping((mote_stop_reason_t)reason->tag, error);
    free(error);
    mote_actor_types_stop_reason_free(reason);
}

bool exports_mote_actor_supervisor_supervise(exports_mote_actor_supervisor_address_t *child,
                                             exports_mote_actor_supervisor_failure_kind_t kind,
                                             mote_world_string_t *error,
                                             exports_mote_actor_supervisor_directive_t *ret) {
    char *text = malloc(error->len + 1);
    memcpy(text, error->ptr, error->len);
    text[error->len] = 0;
    mote_directive_t directive = mote_supervise(child, kind, text);
    free(text);
    mote_world_string_free(error);
    mote_actor_types_address_free(child);
    if (directive == MOTE_DEFER) return false;
    *ret = (exports_mote_actor_supervisor_directive_t)directive;
    return true;
}

bool exports_mote_actor_upgrade_save_state(mote_world_list_u8_t *ret) {
    uint8_t *state = NULL;
    size_t len = 0;
    if (!mote_save_state(&state, &len)) return false;
    *ret = (mote_world_list_u8_t){state, len};
    return true;
}

bool exports_mote_actor_upgrade_migrate(mote_world_string_t *from_version,
                                        mote_world_list_u8_t *state, mote_world_string_t *err) {
    char *version = malloc(from_version->len + 1);
    memcpy(version, from_version->ptr, from_version->len);
    version[from_version->len] = 0;
    const char *error = mote_migrate(version, state->ptr, state->len);
    free(version);
    mote_world_string_free(from_version);
    mote_world_list_u8_free(state);
    return error ? fail_with(error, err) : true;
}

/* The optional hooks' defaults, which an actor replaces by defining its own. */

__attribute__((weak)) void mote_stopping(mote_stop_reason_t reason, const char *error) {
    (void)reason;
    (void)error;
}

__attribute__((weak)) mote_directive_t mote_supervise(const mote_address_t *child,
                                                      mote_failure_kind_t kind,
                                                      const char *error) {
    (void)child;
    (void)kind;
    (void)error;
    return MOTE_DEFER;
}

__attribute__((weak)) bool mote_save_state(uint8_t **state, size_t *state_len) {
    (void)state;
    (void)state_len;
    return false;
}

__attribute__((weak)) const char *mote_migrate(const char *from_version, const uint8_t *state,
                                               size_t state_len) {
    (void)from_version;
    (void)state;
    (void)state_len;
    return "this actor cannot migrate state";
}

/* ---- Addresses and messages ---- */

void mote_address_free(mote_address_t *address) { mote_actor_types_address_free(address); }

mote_address_t mote_myself(void) {
    mote_address_t me;
    mote_actor_host_self_address(&me);
    return me;
}

bool mote_parent(mote_address_t *out) { return mote_actor_host_parent(out); }

const mote_address_t *mote_sender(void) { return current_sender; }

bool mote_is(const mote_msg_t *msg, const char *kind) { return strcmp(msg->kind, kind) == 0; }

bool mote_path_is(const mote_address_t *address, const char *path) {
    size_t len = strlen(path);
    return address->path.len == len && memcmp(address->path.ptr, path, len) == 0;
}

bool mote_tell(const mote_address_t *to, const char *kind, const void *body, size_t len) {
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_host_tell((mote_address_t *)to, &k, &b, &err) || send_failed(&err);
}

bool mote_tell_path(const char *path, const char *kind, const void *body, size_t len) {
    mote_world_string_t p = str_of(path), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_host_tell_path(&p, &k, &b, &err) || send_failed(&err);
}

bool mote_reply(const char *kind, const void *body, size_t len) {
    if (!current_sender) {
        set_error("no sender to reply to", NULL, 0);
        return false;
    }
    return mote_tell(current_sender, kind, body, len);
}

bool mote_forward_path(const char *path, const char *kind, const void *body, size_t len) {
    mote_world_string_t p = str_of(path), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_forwarding_forward_path(&p, &k, &b, &err) || send_failed(&err);
}

void mote_reject(const char *reason) {
    mote_world_string_t r = str_of(reason);
    mote_actor_host_reject(&r);
}

/* ---- Children and supervision ---- */

bool mote_spawn(const char *name, const char *module, const void *init, size_t len,
                mote_address_t *child) {
    mote_world_string_t n = str_of(name), m = str_of(module);
    mote_world_list_u8_t i = bytes_of(init, len);
    mote_actor_types_spawn_error_t err;
    mote_address_t address;
    if (mote_actor_host_spawn(&n, &m, &i, &address, &err)) {
        if (child)
            *child = address;
        else
            mote_actor_types_address_free(&address);
        return true;
    }
    static const char *names[] = {"invalid name", "name taken", "unknown module",
                                  "instantiation failed", "stopping", "quota"};
    const char *what = err.tag < 6 ? names[err.tag] : "spawn refused";
    if (err.tag <= MOTE_ACTOR_TYPES_SPAWN_ERROR_INSTANTIATION)
        set_error(what, (const char *)err.val.invalid_name.ptr, err.val.invalid_name.len);
    else
        set_error(what, NULL, 0);
    mote_actor_types_spawn_error_free(&err);
    return false;
}

void mote_stop(const mote_address_t *target) { mote_actor_host_stop((mote_address_t *)target); }

void mote_stop_self(void) {
    mote_address_t me = mote_myself();
    mote_actor_host_stop(&me);
    mote_actor_types_address_free(&me);
}

bool mote_watch(const mote_address_t *target) {
    mote_actor_types_send_error_t err;
    return mote_actor_supervision_watch((mote_address_t *)target, &err) || send_failed(&err);
}

void mote_unwatch(const mote_address_t *target) {
    mote_actor_supervision_unwatch((mote_address_t *)target);
}

char *mote_restart_cause(void) {
    mote_world_string_t cause;
    if (!mote_actor_supervision_restart_cause(&cause)) return NULL;
    char *text = malloc(cause.len + 1);
    memcpy(text, cause.ptr, cause.len);
    text[cause.len] = 0;
    mote_world_string_free(&cause);
    return text;
}

mote_strategy_t mote_one_for_one(mote_directive_t directive) {
    return (mote_strategy_t){
        .scope = MOTE_ACTOR_TYPES_SCOPE_ONE_FOR_ONE,
        .directive = (mote_actor_types_directive_t)directive,
        .max_restarts = 10,
        .within_ms = 60000,
        .backoff_min_ms = 0,
        .backoff_max_ms = 0,
    };
}

mote_strategy_t mote_all_for_one(mote_directive_t directive) {
    mote_strategy_t strategy = mote_one_for_one(directive);
    strategy.scope = MOTE_ACTOR_TYPES_SCOPE_ALL_FOR_ONE;
    return strategy;
}

void mote_set_strategy(const mote_strategy_t *strategy) {
    mote_actor_supervision_set_strategy((mote_strategy_t *)strategy);
}

/* ---- Timers ---- */

bool mote_schedule_self(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                        uint64_t period_ms, uint64_t *id) {
    mote_address_t me = mote_myself();
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    uint64_t timer;
    bool ok = mote_actor_timers_schedule(&me, &k, &b, delay_ms, period_ms ? &period_ms : NULL,
                                         &timer, &err);
    mote_actor_types_address_free(&me);
    if (!ok) return send_failed(&err);
    if (id) *id = timer;
    return true;
}

bool mote_cancel_timer(uint64_t id) { return mote_actor_timers_cancel(id); }

/* ---- Persistence ---- */

/* Events are replayed in pages of this many. */
#define MOTE_REPLAY_PAGE 256

bool mote_recover(void *state, mote_snapshot_fn on_snapshot, mote_event_fn on_event,
                  mote_recovery_t *recovery) {
    mote_recovery_t r = {0};
    mote_actor_persistence_option_snapshot_t snapshot;
    mote_actor_persistence_persist_error_t err;
    if (!mote_actor_persistence_recover(&snapshot, &err)) return persist_failed(&err);
    if (snapshot.is_some) {
        r.from_snapshot = true;
        r.snapshot_seq = r.last_seq = snapshot.val.seq;
        if (on_snapshot) on_snapshot(state, snapshot.val.state.ptr, snapshot.val.state.len);
        mote_actor_persistence_snapshot_free(&snapshot.val);
    }
    for (;;) {
        mote_actor_persistence_list_event_t events;
        if (!mote_actor_persistence_replay(r.last_seq, MOTE_REPLAY_PAGE, &events, &err))
            return persist_failed(&err);
        size_t count = events.len;
        for (size_t i = 0; i < count; i++) {
            mote_actor_persistence_event_t *event = &events.ptr[i];
            if (on_event) on_event(state, event->seq, event->data.ptr, event->data.len);
            r.last_seq = event->seq;
            r.replayed++;
        }
        mote_actor_persistence_list_event_free(&events);
        if (count < MOTE_REPLAY_PAGE) break;
    }
    if (recovery) *recovery = r;
    return true;
}

bool mote_set_persistence_id(const char *id) {
    mote_world_string_t i = str_of(id);
    mote_actor_persistence_persist_error_t err;
    return mote_actor_persistence_set_persistence_id(&i, &err) || persist_failed(&err);
}

bool mote_persist(const void *event, size_t len, uint64_t *seq) {
    mote_world_list_u8_t data = bytes_of(event, len);
    mote_actor_persistence_persist_error_t err;
    uint64_t at;
    if (!mote_actor_persistence_persist(&data, &at, &err)) return persist_failed(&err);
    if (seq) *seq = at;
    return true;
}

bool mote_save_snapshot(const void *state, size_t len, uint64_t *seq) {
    mote_world_list_u8_t data = bytes_of(state, len);
    mote_actor_persistence_persist_error_t err;
    uint64_t at;
    if (!mote_actor_persistence_save_snapshot(&data, &at, &err)) return persist_failed(&err);
    if (seq) *seq = at;
    return true;
}

bool mote_delete_events(uint64_t through) {
    mote_actor_persistence_persist_error_t err;
    return mote_actor_persistence_delete_events(through, &err) || persist_failed(&err);
}

bool mote_delete_state(void) {
    mote_actor_persistence_persist_error_t err;
    return mote_actor_persistence_delete_state(&err) || persist_failed(&err);
}

bool mote_in_shutdown(void) { return mote_actor_persistence_in_shutdown(); }

bool mote_remind(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                 uint64_t period_ms, uint64_t *id) {
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_persistence_persist_error_t err;
    uint64_t reminder;
    if (!mote_actor_persistence_remind(&k, &b, delay_ms, period_ms ? &period_ms : NULL,
                                       &reminder, &err))
        return persist_failed(&err);
    if (id) *id = reminder;
    return true;
}

bool mote_cancel_reminder(uint64_t id) { return mote_actor_persistence_cancel_reminder(id); }

/* ---- Logging ---- */

void mote_log(mote_log_level_t level, const char *text) {
    mote_world_string_t t = str_of(text);
    mote_actor_host_log((mote_actor_types_log_level_t)level, &t);
}

/* ---- Text helpers ---- */

size_t mote_u64_to_text(uint64_t value, char *out) {
    char digits[21];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    for (size_t i = 0; i < n; i++) out[i] = digits[n - 1 - i];
    out[n] = 0;
    return n;
}

bool mote_text_to_u64(const uint8_t *text, size_t len, uint64_t *value) {
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) i++;
    if (i == len || text[i] < '0' || text[i] > '9') return false;
    uint64_t v = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) v = v * 10 + (uint64_t)(text[i] - '0');
    *value = v;
    return true;
}

bool mote_json_u64(const uint8_t *json, size_t len, const char *field, uint64_t *value) {
    size_t flen = strlen(field);
    for (size_t i = 0; i + flen + 2 <= len; i++) {
        if (json[i] != '"' || memcmp(json + i + 1, field, flen) != 0 || json[i + flen + 1] != '"')
            continue;
        size_t j = i + flen + 2;
        while (j < len && (json[j] == ' ' || json[j] == '\n' || json[j] == '\t')) j++;
        if (j == len || json[j] != ':') continue;
        return mote_text_to_u64(json + j + 1, len - j - 1, value);
    }
    return false;
}

void mote_buf_push(mote_buf_t *buf, const void *bytes, size_t len) {
    if (buf->len + len > buf->cap) {
        size_t cap = buf->cap ? buf->cap * 2 : 64;
        while (cap < buf->len + len) cap *= 2;
        uint8_t *data = realloc(buf->data, cap);
        if (!data) abort();
        buf->data = data;
        buf->cap = cap;
    }
    memcpy(buf->data + buf->len, bytes, len);
    buf->len += len;
}

void mote_buf_str(mote_buf_t *buf, const char *text) { mote_buf_push(buf, text, strlen(text)); }

void mote_buf_u64(mote_buf_t *buf, uint64_t value) {
    char digits[21];
    mote_buf_push(buf, digits, mote_u64_to_text(value, digits));
}

void mote_buf_free(mote_buf_t *buf) {
    free(buf->data);
    *buf = (mote_buf_t){0};
}
