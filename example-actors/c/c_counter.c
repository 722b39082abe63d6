/* c_counter: a Mote actor in C, written against the canonical ABI of the mote:actor world by
 * hand (no bindings generator, no libc): the small-footprint end of the language range.
 *
 * Bodies are JSON numbers as text. `add` "5" adds 5, `get` replies `total` with the sum,
 * `fail` returns an error (a supervised failure).
 *
 * Built by test-programs/build.rs: `zig cc -target wasm32-freestanding`, then the world is embedded and
 * the module wrapped into a component with wit-component.
 */
#include <stdint.h>
#include <stddef.h>

#define IMPORT(module, name) __attribute__((import_module(module), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

/* mote:actor/host: log(level: log-level, message: string) */
IMPORT("mote:actor/host@0.2.0", "log")
void host_log(int32_t level, const char *msg, size_t len);

/* mote:actor/host: tell(to: address, kind: string, body: list<u8>) -> result<_, send-error>;
 * the result comes back through a return area (24 bytes, 8-aligned). */
IMPORT("mote:actor/host@0.2.0", "tell")
void host_tell(const char *path, size_t path_len, int64_t incarnation, const char *kind,
               size_t kind_len, const uint8_t *body, size_t body_len, void *ret);

/* A bump allocator over a static heap; everything a call allocated is dropped when it returns. */
static uint8_t heap[64 * 1024];
static size_t heap_top;

EXPORT("cabi_realloc")
void *cabi_realloc(void *old, size_t old_size, size_t align, size_t new_size) {
    size_t start = (heap_top + align - 1) & ~(align - 1);
    if (start + new_size > sizeof heap) __builtin_trap();
    uint8_t *p = heap + start;
    heap_top = start + new_size;
    for (size_t i = 0; old && i < old_size && i < new_size; i++) p[i] = ((uint8_t *)old)[i];
    return p;
}

static size_t slen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

static int eq(const char *a, size_t alen, const char *b) {
    size_t blen = slen(b);
    if (alen != blen) return 0;
    for (size_t i = 0; i < alen; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void say(const char *text) { host_log(2 /* info */, text, slen(text)); }

/* result<_, string> return area: tag at 0, then the string at 4 and 8. */
static int32_t ret_area[3];

static int32_t *ok(void) {
    ret_area[0] = 0;
    heap_top = 0;
    return ret_area;
}

static int32_t *err(const char *message) {
    ret_area[0] = 1;
    ret_area[1] = (int32_t)(uintptr_t)message;
    ret_area[2] = (int32_t)slen(message);
    heap_top = 0;
    return ret_area;
}

static uint64_t total;

EXPORT("mote:actor/actor@0.2.0#start")
int32_t *start(const uint8_t *init, size_t init_len) {
    (void)init;
    (void)init_len;
    total = 0;
    say("c_counter started");
    return ok();
}

EXPORT("mote:actor/actor@0.2.0#receive")
int32_t *receive(int32_t has_sender, const char *sender_path, size_t sender_len,
                 int64_t sender_incarnation, const char *kind, size_t kind_len,
                 const uint8_t *body, size_t body_len) {
    if (eq(kind, kind_len, "add")) {
        uint64_t n = 0;
        size_t i = 0;
        while (i < body_len && (body[i] == ' ' || body[i] == '\n')) i++;
        if (i == body_len) return err("add: the body is not a JSON number");
        for (; i < body_len && body[i] >= '0' && body[i] <= '9'; i++) n = n * 10 + (body[i] - '0');
        total += n;
    } else if (eq(kind, kind_len, "get")) {
        if (!has_sender) return ok();
        char digits[24];
        size_t len = 0;
        uint64_t v = total;
        do {
            digits[sizeof digits - 1 - len++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        _Alignas(8) uint8_t result[24];
        host_tell(sender_path, sender_len, sender_incarnation, "total", 5,
                  (const uint8_t *)digits + sizeof digits - len, len, result);
        if (result[0] != 0) return err("get: the reply could not be sent");
    } else if (eq(kind, kind_len, "fail")) {
        return err("c_counter was asked to fail");
    }
    return ok();
}

EXPORT("mote:actor/actor@0.2.0#stopping")
void stopping(int32_t reason, const char *text, size_t text_len) {
    (void)reason;
    (void)text;
    (void)text_len;
    heap_top = 0;
}
