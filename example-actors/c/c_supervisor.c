/* c_supervisor: the supervisor of `example-actors/supervisor` in C: a parent with a strategy
 * over watched children, which in its `by-error` mode decides per failure in `mote_supervise`.
 *
 * Init: `<one|all> <resume|restart|stop|escalate|by-error> <max-restarts> <within-ms>
 * <children> <child-module> <R> [backoff-min-ms] [backoff-max-ms] [node]`, as the Rust one's:
 * it sets its strategy (`by-error` has `restart` as the strategy's directive), spawns `c0..cN`
 * from the module with R as their init (on the cluster node `node` if given) and watches them.
 * In `by-error` mode the first of `resume`, `restart`, `stop`, `escalate` in a child's error text
 * is the directive (none: the strategy decides). It reports (the protocol's `Report` in JSON,
 * protocol.h) `kind:<failure kind>` = 0 from the child's path for every failure, and
 * `terminated` = its incarnation for every child that ends.
 */
#include <stdlib.h>
#include <string.h>

#include "mote.h"
#include "protocol.h"

#define MAX_WORDS 10

static const struct {
    const char *word;
    mote_directive_t directive;
} DIRECTIVES[] = {{"resume", MOTE_RESUME},
                  {"restart", MOTE_RESTART},
                  {"stop", MOTE_STOP},
                  {"escalate", MOTE_ESCALATE}};

/* The failure kinds' names, in the order of `failure-kind` in wit/actor.wit. */
static const char *KIND_NAMES[] = {"trap",           "error",         "memory-limit", "cpu-deadline",
                                   "stack-overflow", "instantiation", "commit"};

static char *report_to;
static bool by_error;

/* The directive named `word`; false if it names none. */
static bool directive_named(const char *word, mote_directive_t *directive) {
    for (size_t i = 0; i < sizeof DIRECTIVES / sizeof *DIRECTIVES; i++) {
        if (strcmp(word, DIRECTIVES[i].word) == 0) {
            *directive = DIRECTIVES[i].directive;
            return true;
        }
    }
    return false;
}

const char *mote_start(const uint8_t *init, size_t init_len) {
    char *words[MAX_WORDS];
    size_t n = 0;
    for (char *w = strtok(text_of(init, init_len), " \n"); w && n < MAX_WORDS;
         w = strtok(NULL, " \n"))
        words[n++] = w;
    if (n < 7)
        return "init: <scope> <directive> <max-restarts> <within-ms> <children> <child-module> "
               "<report-path> [backoff-min-ms] [backoff-max-ms] [node]";
    mote_directive_t directive = MOTE_RESTART;
    by_error = strcmp(words[1], "by-error") == 0;
    if (!by_error && !directive_named(words[1], &directive))
        return "init: the directive is none of resume|restart|stop|escalate|by-error";
    if (strcmp(words[0], "one") != 0 && strcmp(words[0], "all") != 0)
        return "init: the scope is neither one nor all";
    mote_strategy_t strategy = strcmp(words[0], "one") == 0 ? mote_one_for_one(directive)
                                                            : mote_all_for_one(directive);
    uint64_t max_restarts, within_ms, children, backoff_min = 0, backoff_max = 0;
    if (!mote_text_to_u64((const uint8_t *)words[2], strlen(words[2]), &max_restarts) ||
        !mote_text_to_u64((const uint8_t *)words[3], strlen(words[3]), &within_ms) ||
        !mote_text_to_u64((const uint8_t *)words[4], strlen(words[4]), &children))
        return "init: max-restarts, within-ms and children are numbers";
    if (n > 8 && (!mote_text_to_u64((const uint8_t *)words[7], strlen(words[7]), &backoff_min) ||
                  !mote_text_to_u64((const uint8_t *)words[8], strlen(words[8]), &backoff_max)))
        return "init: the backoff is two numbers";
    strategy.max_restarts = (uint32_t)max_restarts;
    strategy.within_ms = within_ms;
    strategy.backoff_min_ms = backoff_min;
    strategy.backoff_max_ms = backoff_max;
    mote_set_strategy(&strategy);
    const char *module = words[5], *node = n > 9 ? words[9] : NULL;
    report_to = words[6];
    for (uint64_t i = 0; i < children; i++) {
        char name[24] = "c";
        mote_u64_to_text(i, name + 1);
        mote_address_t child;
        size_t len = strlen(report_to);
        MOTE_TRY(node ? mote_spawn_on(node, name, module, report_to, len, NULL, &child)
                      : mote_spawn(name, module, report_to, len, &child));
        bool watched = mote_watch(&child);
        mote_address_free(&child);
        if (!watched) return mote_last_error();
    }
    return NULL;
}

mote_directive_t mote_supervise(const mote_address_t *child, mote_failure_kind_t kind,
                                const char *error) {
    char label[32] = "kind:";
    if ((size_t)kind < sizeof KIND_NAMES / sizeof *KIND_NAMES)
        strcat(label, KIND_NAMES[kind]);
    if (!report_json(report_to, child->path.ptr, child->path.len, label, 0))
        mote_warn(mote_last_error());
    if (!by_error) return MOTE_DEFER;
    for (size_t i = 0; i < sizeof DIRECTIVES / sizeof *DIRECTIVES; i++)
        if (strstr(error, DIRECTIVES[i].word)) return DIRECTIVES[i].directive;
    return MOTE_DEFER;
}

const char *mote_receive(const mote_msg_t *msg) {
    if (mote_is(msg, "mote.terminated") && msg->sender)
        MOTE_TRY(report_json(report_to, msg->sender->path.ptr, msg->sender->path.len,
                             "terminated", msg->sender->incarnation));
    return NULL;
}
