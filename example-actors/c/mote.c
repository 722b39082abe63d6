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

/* A malloc'd, NUL-terminated copy of `len` bytes of text. */
static char *text_of(const uint8_t *bytes, size_t len) {
    char *text = malloc(len + 1);
    if (!text) abort();
    memcpy(text, bytes, len);
    text[len] = 0;
    return text;
}

/* ---- Borrowed views of C data as component-model types (no copies: the host copies) ---- */

static mote_world_string_t str_of(const char *text) {
    return (mote_world_string_t){(uint8_t *)text, text ? strlen(text) : 0};
}

static mote_world_list_u8_t bytes_of(const void *body, size_t len) {
    return (mote_world_list_u8_t){(uint8_t *)body, len};
}

/* ---- Behaviours and the stash: the requests of the running hook ---- */

typedef enum request_kind { BECOME, UNBECOME, STASH, UNSTASH_ALL } request_kind_t;

static struct request {
    request_kind_t kind;
    mote_behavior_fn behavior;
} *requests;
static size_t request_count, request_cap;

static mote_behavior_fn *behaviors;
static size_t behavior_count, behavior_cap;

/* True while `mote_receive` (or a behaviour) handles a message. */
static bool in_message;

static void *grow(void *array, size_t *cap, size_t size) {
    size_t more = *cap ? *cap * 2 : 8;
    void *bigger = realloc(array, more * size);
    if (!bigger) abort();
    *cap = more;
    return bigger;
}

static void request(request_kind_t kind, mote_behavior_fn behavior) {
    if (request_count == request_cap) requests = grow(requests, &request_cap, sizeof *requests);
    requests[request_count++] = (struct request){kind, behavior};
}

static void stash_now(void) {
    mote_actor_stash_stash_error_t err;
    if (mote_actor_stash_stash(&err)) return;
    const char *why = err.tag == MOTE_ACTOR_STASH_STASH_ERROR_FULL
                          ? "the stash refused the message: full"
                          : "the stash refused the message: no message";
    mote_warn(why);
    mote_reject(why);
}

/* Applies the requests of a hook that returned NULL, in call order; drops those of one that
 * failed. */
static void settle_requests(bool succeeded) {
    for (size_t i = 0; succeeded && i < request_count; i++) {
        switch (requests[i].kind) {
        case BECOME:
            if (behavior_count == behavior_cap)
                behaviors = grow(behaviors, &behavior_cap, sizeof *behaviors);
            behaviors[behavior_count++] = requests[i].behavior;
            break;
        case UNBECOME:
            if (behavior_count) behavior_count--;
            break;
        case STASH:
            stash_now();
            break;
        case UNSTASH_ALL:
            mote_actor_stash_unstash_all();
            break;
        }
    }
    request_count = 0;
}

void mote_become(mote_behavior_fn behavior) { request(BECOME, behavior); }

void mote_unbecome(void) { request(UNBECOME, NULL); }

void mote_stash(void) {
    if (in_message)
        request(STASH, NULL);
    else
        mote_warn("stash ignored: this hook is not handling a message");
}

void mote_unstash_all(void) { request(UNSTASH_ALL, NULL); }

uint32_t mote_stashed(void) { return mote_actor_stash_stashed(); }

/* A stashed message the caller owns: the view first, so a `mote_msg_t *` is one of these. */
typedef struct owned_msg {
    mote_msg_t view;
    mote_actor_types_message_t wit;
    char kind[];
} owned_msg_t;

static mote_msg_t *own_message(mote_actor_types_message_t *wit) {
    owned_msg_t *msg = malloc(sizeof *msg + wit->kind.len + 1);
    if (!msg) abort();
    msg->wit = *wit;
    memcpy(msg->kind, wit->kind.ptr, wit->kind.len);
    msg->kind[wit->kind.len] = 0;
    msg->view = (mote_msg_t){
        .sender = msg->wit.sender.is_some ? &msg->wit.sender.val : NULL,
        .kind = msg->kind,
        .body = msg->wit.body.ptr,
        .body_len = msg->wit.body.len,
    };
    return &msg->view;
}

mote_msg_t *mote_peek(const char *kind) {
    mote_world_string_t k = str_of(kind);
    mote_actor_stash_message_t found;
    return mote_actor_stash_peek(kind ? &k : NULL, &found) ? own_message(&found) : NULL;
}

mote_msg_t *mote_take(const char *kind) {
    mote_world_string_t k = str_of(kind);
    mote_actor_stash_message_t found;
    return mote_actor_stash_take(kind ? &k : NULL, &found) ? own_message(&found) : NULL;
}

void mote_msg_free(mote_msg_t *msg) {
    if (!msg) return;
    owned_msg_t *owned = (owned_msg_t *)msg;
    mote_actor_types_message_free(&owned->wit);
    free(owned);
}

/* ---- The exports ---- */

static const mote_address_t *current_sender;

static bool fail_with(const char *error, mote_world_string_t *err) {
    mote_world_string_dup(err, error);
    return false;
}

bool exports_mote_actor_actor_start(mote_world_list_u8_t *init, mote_world_string_t *err) {
    behavior_count = request_count = 0; /* a fresh instance starts in `mote_receive` */
    const char *error = mote_start(init->ptr, init->len);
    settle_requests(!error);
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
    in_message = true;
    request_count = 0;
    mote_behavior_fn handler = behavior_count ? behaviors[behavior_count - 1] : mote_receive;
    const char *error = handler(&view);
    settle_requests(!error);
    in_message = false;
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
    request_count = 0;
    mote_directive_t directive = mote_supervise(child, kind, text);
    settle_requests(true);
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
    behavior_count = request_count = 0;
    const char *error = mote_migrate(version, state->ptr, state->len);
    settle_requests(!error);
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

bool mote_forward(const mote_address_t *to, const char *kind, const void *body, size_t len) {
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_forwarding_forward((mote_address_t *)to, &k, &b, &err) ||
           send_failed(&err);
}

bool mote_tell_urgent(const mote_address_t *to, const char *kind, const void *body, size_t len) {
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_priority_tell_urgent((mote_address_t *)to, &k, &b, &err) ||
           send_failed(&err);
}

bool mote_tell_urgent_path(const char *path, const char *kind, const void *body, size_t len) {
    mote_world_string_t p = str_of(path), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    return mote_actor_priority_tell_path_urgent(&p, &k, &b, &err) || send_failed(&err);
}

void mote_reject(const char *reason) {
    mote_world_string_t r = str_of(reason);
    mote_actor_host_reject(&r);
}

/* ---- Asks ---- */

bool mote_ask(const char *path, const char *kind, const void *body, size_t len,
              uint64_t timeout_ms, uint64_t *id) {
    mote_address_t to = {.path = str_of(path), .incarnation = 0}; /* whoever lives there */
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    uint64_t ask;
    if (!mote_actor_messaging_ask(&to, &k, &b, timeout_ms, &ask, &err)) return send_failed(&err);
    if (id) *id = ask;
    return true;
}

/* True when `msg` comes from an ask endpoint; `id` gets the ask id. */
static bool from_ask(const mote_msg_t *msg, uint64_t *id) {
    size_t n = strlen(MOTE_ASK_PREFIX);
    if (!msg->sender || msg->sender->path.len <= n ||
        memcmp(msg->sender->path.ptr, MOTE_ASK_PREFIX, n) != 0)
        return false;
    if (id) *id = msg->sender->incarnation;
    return true;
}

bool mote_is_answer(const mote_msg_t *msg, uint64_t *id) {
    return !mote_is(msg, MOTE_ASK_TIMEOUT) && from_ask(msg, id);
}

bool mote_is_ask_timeout(const mote_msg_t *msg, uint64_t *id) {
    return mote_is(msg, MOTE_ASK_TIMEOUT) && from_ask(msg, id);
}

/* ---- Topics and groups ---- */

bool mote_subscribe(const char *topic) {
    mote_world_string_t t = str_of(topic);
    mote_actor_types_send_error_t err;
    return mote_actor_messaging_subscribe(&t, &err) || send_failed(&err);
}

void mote_unsubscribe(const char *topic) {
    mote_world_string_t t = str_of(topic);
    mote_actor_messaging_unsubscribe(&t);
}

bool mote_publish(const char *topic, const char *kind, const void *body, size_t len,
                  uint32_t *reached) {
    mote_world_string_t t = str_of(topic), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    uint32_t count;
    if (!mote_actor_messaging_publish(&t, &k, &b, &count, &err)) return send_failed(&err);
    if (reached) *reached = count;
    return true;
}

bool mote_join(const char *group) {
    mote_world_string_t g = str_of(group);
    mote_actor_types_send_error_t err;
    return mote_actor_messaging_join(&g, &err) || send_failed(&err);
}

void mote_leave(const char *group) {
    mote_world_string_t g = str_of(group);
    mote_actor_messaging_leave(&g);
}

bool mote_tell_group(const char *group, const char *kind, const void *body, size_t len,
                     bool *delivered) {
    mote_world_string_t g = str_of(group), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    bool sent;
    if (!mote_actor_messaging_tell_group(&g, &k, &b, &sent, &err)) return send_failed(&err);
    if (delivered) *delivered = sent;
    return true;
}

bool mote_broadcast_group(const char *group, const char *kind, const void *body, size_t len,
                          uint32_t *reached) {
    mote_world_string_t g = str_of(group), k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    uint32_t count;
    if (!mote_actor_messaging_broadcast_group(&g, &k, &b, &count, &err))
        return send_failed(&err);
    if (reached) *reached = count;
    return true;
}

/* ---- Lookup and the clock ---- */

bool mote_resolve(const char *path, mote_address_t *address) {
    mote_world_string_t p = str_of(path);
    mote_address_t found;
    if (!mote_actor_lookup_resolve(&p, &found)) {
        set_error("no actor lives at", path, strlen(path));
        return false;
    }
    if (address)
        *address = found;
    else
        mote_actor_types_address_free(&found);
    return true;
}

bool mote_mailbox_depth(const char *path, uint32_t *depth) {
    mote_world_string_t p = str_of(path);
    uint32_t found;
    if (!mote_actor_lookup_mailbox_depth(&p, &found))
        return false;
    if (depth) *depth = found;
    return true;
}

void mote_children(mote_address_t **children, size_t *count) {
    mote_actor_lookup_list_address_t list;
    mote_actor_lookup_children(&list);
    *children = list.len ? list.ptr : NULL;
    *count = list.len;
    if (!list.len) mote_actor_lookup_list_address_free(&list);
}

void mote_children_free(mote_address_t *children, size_t count) {
    mote_actor_lookup_list_address_t list = {children, count};
    if (children) mote_actor_lookup_list_address_free(&list);
}

uint64_t mote_since_start(void) { return mote_actor_clock_since_start(); }

uint64_t mote_cpu_time(void) { return mote_actor_clock_cpu_time(); }

/* ---- Children and supervision ---- */

static bool spawn_failed(mote_actor_types_spawn_error_t *err) {
    static const char *names[] = {"invalid name", "name taken", "unknown module",
                                  "instantiation failed", "stopping", "quota"};
    const char *what = err->tag < 6 ? names[err->tag] : "spawn refused";
    if (err->tag <= MOTE_ACTOR_TYPES_SPAWN_ERROR_INSTANTIATION) {
        /* These cases all carry a string at the same place. */
        set_error(what, (const char *)err->val.invalid_name.ptr, err->val.invalid_name.len);
    } else if (err->tag == MOTE_ACTOR_TYPES_SPAWN_ERROR_QUOTA) {
        const char *q = quota_name(err->val.quota);
        set_error(what, q, strlen(q));
    } else {
        set_error(what, NULL, 0);
    }
    mote_actor_types_spawn_error_free(err);
    return false;
}

/* Hands the spawned `address` to `child`, or frees it. */
static bool spawned(mote_address_t *address, mote_address_t *child) {
    if (child)
        *child = *address;
    else
        mote_actor_types_address_free(address);
    return true;
}

bool mote_spawn(const char *name, const char *module, const void *init, size_t len,
                mote_address_t *child) {
    mote_world_string_t n = str_of(name), m = str_of(module);
    mote_world_list_u8_t i = bytes_of(init, len);
    mote_actor_types_spawn_error_t err;
    mote_address_t address;
    return mote_actor_host_spawn(&n, &m, &i, &address, &err) ? spawned(&address, child)
                                                             : spawn_failed(&err);
}

/* The contract's spawn options of `limits`: 0 (or no limits) is `none`, the parent's. */
static mote_actor_types_spawn_options_t spawn_options(const mote_limits_t *limits) {
    mote_limits_t l = limits ? *limits : (mote_limits_t){0};
    return (mote_actor_types_spawn_options_t){
        .mailbox_capacity = {l.mailbox_capacity != 0, l.mailbox_capacity},
        .memory_limit = {l.memory_limit != 0, l.memory_limit},
        .cpu_deadline_ms = {l.cpu_deadline_ms != 0, l.cpu_deadline_ms},
        .mailbox_bytes = {l.mailbox_bytes != 0, l.mailbox_bytes},
        .descendants = {l.descendants != 0,
                        l.descendants == MOTE_NO_DESCENDANTS ? 0 : l.descendants},
    };
}

bool mote_spawn_with(const char *name, const char *module, const void *init, size_t len,
                     const mote_limits_t *limits, mote_address_t *child) {
    mote_world_string_t n = str_of(name), m = str_of(module);
    mote_world_list_u8_t i = bytes_of(init, len);
    mote_actor_types_spawn_options_t options = spawn_options(limits);
    mote_actor_types_spawn_error_t err;
    mote_address_t address;
    return mote_actor_supervision_spawn_with(&n, &m, &i, &options, &address, &err)
               ? spawned(&address, child)
               : spawn_failed(&err);
}

bool mote_spawn_on(const char *node, const char *name, const char *module, const void *init,
                   size_t len, const mote_limits_t *limits, mote_address_t *child) {
    mote_world_string_t o = str_of(node), n = str_of(name), m = str_of(module);
    mote_world_list_u8_t i = bytes_of(init, len);
    mote_actor_types_spawn_options_t options = spawn_options(limits);
    mote_actor_types_spawn_error_t err;
    mote_address_t address;
    return mote_actor_supervision_spawn_on(&o, &n, &m, &i, &options, &address, &err)
               ? spawned(&address, child)
               : spawn_failed(&err);
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

bool mote_deactivate(const mote_address_t *child) {
    return mote_actor_lifecycle_deactivate((mote_address_t *)child);
}

bool mote_activate(const mote_address_t *child) {
    return mote_actor_lifecycle_activate((mote_address_t *)child);
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

bool mote_schedule(const mote_address_t *to, const char *kind, const void *body, size_t len,
                   uint64_t delay_ms, uint64_t period_ms, uint64_t *id) {
    mote_world_string_t k = str_of(kind);
    mote_world_list_u8_t b = bytes_of(body, len);
    mote_actor_types_send_error_t err;
    uint64_t timer;
    if (!mote_actor_timers_schedule((mote_address_t *)to, &k, &b, delay_ms,
                                    period_ms ? &period_ms : NULL, &timer, &err))
        return send_failed(&err);
    if (id) *id = timer;
    return true;
}

bool mote_schedule_self(const char *kind, const void *body, size_t len, uint64_t delay_ms,
                        uint64_t period_ms, uint64_t *id) {
    mote_address_t me = mote_myself();
    bool ok = mote_schedule(&me, kind, body, len, delay_ms, period_ms, id);
    mote_actor_types_address_free(&me);
    return ok;
}

bool mote_cancel_timer(uint64_t id) { return mote_actor_timers_cancel(id); }

/* ---- Naming ---- */

bool mote_alias(const char *name, char **path) {
    mote_world_string_t n = str_of(name), alias;
    mote_actor_types_send_error_t err;
    if (!mote_actor_naming_alias(&n, &alias, &err)) return send_failed(&err);
    if (path) *path = text_of(alias.ptr, alias.len);
    mote_world_string_free(&alias);
    return true;
}

bool mote_unalias(const char *name) {
    mote_world_string_t n = str_of(name);
    return mote_actor_naming_unalias(&n);
}

/* ---- Delivery ---- */

void mote_set_delivery(mote_delivery_t mode) {
    mote_actor_delivery_set_delivery((mote_actor_delivery_delivery_mode_t)mode);
}

mote_delivery_t mote_delivery(void) { return (mote_delivery_t)mote_actor_delivery_delivery(); }

/* ---- HTTP call-outs ---- */

static bool callout_failed(mote_actor_callouts_callout_error_t *err) {
    static const char *names[] = {"not granted wasi:http", "invalid url", "invalid request",
                                  "too many call-outs", "response too large", "timeout",
                                  "failed"};
    const char *what = err->tag < 7 ? names[err->tag] : "call-out refused";
    switch (err->tag) {
    case MOTE_ACTOR_CALLOUTS_CALLOUT_ERROR_INVALID_URL:
    case MOTE_ACTOR_CALLOUTS_CALLOUT_ERROR_INVALID_REQUEST:
    case MOTE_ACTOR_CALLOUTS_CALLOUT_ERROR_FAILED:
        /* These cases all carry a string at the same place. */
        set_error(what, (const char *)err->val.failed.ptr, err->val.failed.len);
        break;
    default:
        set_error(what, NULL, 0);
    }
    mote_actor_callouts_callout_error_free(err);
    return false;
}

bool mote_http_request(const mote_http_request_t *request, uint64_t *id) {
    mote_world_tuple2_string_string_t *headers = NULL;
    if (request->header_count) {
        headers = malloc(request->header_count * sizeof *headers);
        if (!headers) abort();
        for (size_t i = 0; i < request->header_count; i++)
            headers[i] = (mote_world_tuple2_string_string_t){str_of(request->headers[i].name),
                                                             str_of(request->headers[i].value)};
    }
    mote_actor_callouts_request_t r = {
        .method = str_of(request->method),
        .url = str_of(request->url),
        .headers = {headers, request->header_count},
        .body = bytes_of(request->body, request->body_len),
        .timeout_ms = request->timeout_ms,
    };
    mote_actor_callouts_callout_error_t err;
    uint64_t callout;
    bool ok = mote_actor_callouts_http_request(&r, &callout, &err);
    free(headers);
    if (!ok) return callout_failed(&err);
    if (id) *id = callout;
    return true;
}

bool mote_is_http_response(const mote_msg_t *msg, uint64_t *id) {
    if (!mote_is(msg, MOTE_HTTP_RESPONSE) || msg->sender || msg->body_len != 8) return false;
    uint64_t callout = 0;
    for (size_t i = 8; i-- > 0;) callout = callout << 8 | msg->body[i];
    if (id) *id = callout;
    return true;
}

bool mote_http_response(uint64_t id, mote_http_response_t *response) {
    mote_actor_callouts_result_response_callout_error_t outcome;
    if (!mote_actor_callouts_http_response(id, &outcome)) {
        set_error("no outcome for this call-out", NULL, 0);
        return false;
    }
    if (outcome.is_err) return callout_failed(&outcome.val.err);
    mote_actor_callouts_response_t *r = &outcome.val.ok;
    size_t count = r->headers.len;
    mote_http_header_t *headers = NULL;
    if (count) {
        headers = malloc(count * sizeof *headers);
        if (!headers) abort();
        for (size_t i = 0; i < count; i++) {
            mote_world_tuple2_string_string_t *h = &r->headers.ptr[i];
            headers[i] = (mote_http_header_t){text_of(h->f0.ptr, h->f0.len),
                                              text_of(h->f1.ptr, h->f1.len)};
        }
    }
    mote_world_list_tuple2_string_string_free(&r->headers);
    *response = (mote_http_response_t){
        .status = r->status,
        .headers = headers,
        .header_count = count,
        .body = r->body.len ? r->body.ptr : NULL, /* an empty list's pointer is not malloc's */
        .body_len = r->body.len,
    };
    return true;
}

static bool same_ascii_case(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? *a + 32 : *a, y = *b >= 'A' && *b <= 'Z' ? *b + 32 : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

const char *mote_http_header(const mote_http_response_t *response, const char *name) {
    for (size_t i = 0; i < response->header_count; i++)
        if (same_ascii_case(response->headers[i].name, name)) return response->headers[i].value;
    return NULL;
}

void mote_http_response_free(mote_http_response_t *response) {
    for (size_t i = 0; i < response->header_count; i++) {
        free((char *)response->headers[i].name);
        free((char *)response->headers[i].value);
    }
    free(response->headers);
    free(response->body);
    *response = (mote_http_response_t){0};
}

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

char *mote_persistence_id(void) {
    mote_world_string_t id;
    mote_actor_persistence_persistence_id(&id);
    char *text = text_of(id.ptr, id.len);
    mote_world_string_free(&id);
    return text;
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

static bool is_blank(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_blanks(const uint8_t *text, size_t len, size_t i) {
    while (i < len && is_blank(text[i])) i++;
    return i;
}

/* Reads the JSON string at `json[i]` (without escapes) into `name`: the index after its
 * closing quote, or 0 if there is none or it does not fit `cap` bytes with its NUL. */
static size_t read_name(const uint8_t *json, size_t len, size_t i, char *name, size_t cap) {
    if (i >= len || json[i] != '"') return 0;
    size_t n = 0;
    for (i++; i < len && json[i] != '"'; i++) {
        if (json[i] == '\\' || n + 1 >= cap) return 0;
        name[n++] = (char)json[i];
    }
    if (i == len) return 0;
    name[n] = 0;
    return i + 1;
}

bool mote_json_variant(const uint8_t *json, size_t len, char *name, size_t cap,
                       const uint8_t **value, size_t *value_len) {
    size_t end = len;
    while (end > 0 && is_blank(json[end - 1])) end--;
    size_t i = skip_blanks(json, end, 0);
    if (i < end && json[i] == '"') {
        if (read_name(json, end, i, name, cap) != end) return false;
        *value = json + end;
        *value_len = 0;
        return true;
    }
    if (i == end || json[i] != '{' || json[end - 1] != '}') return false;
    i = read_name(json, end, skip_blanks(json, end, i + 1), name, cap);
    if (i == 0) return false;
    i = skip_blanks(json, end, i);
    if (i == end || json[i] != ':') return false;
    size_t from = skip_blanks(json, end - 1, i + 1), to = end - 1;
    while (to > from && is_blank(json[to - 1])) to--;
    if (to == from) return false;
    *value = json + from;
    *value_len = to - from;
    return true;
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
