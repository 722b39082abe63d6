/* c_counter: a Mote actor in C, on the C SDK (mote.h over the bindings wit-bindgen generates):
 * the small-footprint end of the language range.
 *
 * Bodies are JSON numbers as text. `add` "5" adds 5, `get` replies `total` with the sum,
 * `fail` returns an error (a supervised failure) that ends with the body's text, if any.
 */
#include "mote.h"

static uint64_t total;

const char *mote_start(const uint8_t *init, size_t init_len) {
    (void)init;
    (void)init_len;
    total = 0;
    mote_info("c_counter started");
    return NULL;
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "add")) {
        uint64_t n;
        if (!mote_text_to_u64(msg->body, msg->body_len, &n))
            return "add: the body is not a JSON number";
        total += n;
    } else if (mote_is(msg, "get")) {
        if (!mote_sender()) return NULL;
        char digits[21];
        MOTE_TRY(mote_reply("total", digits, mote_u64_to_text(total, digits)));
    } else if (mote_is(msg, "fail")) {
        static char error[128] = "c_counter was asked to fail";
        size_t n = 27;
        if (msg->body_len) {
            error[n++] = ':';
            error[n++] = ' ';
            for (size_t i = 0; i < msg->body_len && n < sizeof error - 1; i++)
                error[n++] = (char)msg->body[i];
        }
        error[n] = 0;
        return error;
    }
    return NULL;
}
