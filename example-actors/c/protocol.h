/* protocol.h: the example protocol in JSON, as the Python and JavaScript ports speak it: the
 * `Report` the C ports tell their observer (kind `Report`, {"from": <path>, "label": ..,
 * "value": ..}) and their replies. Included by the C examples, not part of the SDK; `inline`,
 * so that an example using only some of it compiles without unused-function warnings. */
#ifndef MOTE_EXAMPLE_PROTOCOL_H
#define MOTE_EXAMPLE_PROTOCOL_H

#include <stdlib.h>
#include <string.h>

#include "mote.h"

/* Tells the actor at `to` the Report `label` = `value`, from the path `from` (`from_len`
 * bytes, not NUL-terminated). */
static inline bool report_json(const char *to, const uint8_t *from, size_t from_len, const char *label,
                        uint64_t value) {
    mote_buf_t body = {0};
    mote_buf_str(&body, "{\"from\":\"");
    mote_buf_push(&body, from, from_len);
    mote_buf_str(&body, "\",\"label\":\"");
    mote_buf_str(&body, label);
    mote_buf_str(&body, "\",\"value\":");
    mote_buf_u64(&body, value);
    mote_buf_str(&body, "}");
    bool sent = mote_tell_path(to, "Report", body.data, body.len);
    mote_buf_free(&body);
    return sent;
}

/* A copy of `len` bytes of `text`, NUL-terminated (malloc'd). */
static inline char *text_of(const uint8_t *text, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy) abort();
    memcpy(copy, text, len);
    copy[len] = 0;
    return copy;
}

/* Replies `kind` with the JSON in `body`, and frees `body`: NULL, or the host's error. */
static inline const char *reply_json(const char *kind, mote_buf_t *body) {
    bool sent = mote_reply(kind, body->data, body->len);
    mote_buf_free(body);
    return sent ? NULL : mote_last_error();
}

#endif
