/* tool-gate: an mcpproxy validator plugin written in C.
 *
 * An operator's gate in front of the tools, configured in plugins.settings.tool-gate:
 *
 *   deny            ["server:tool" glob, ...]  calls to a matching tool are rejected;
 *   allow           ["server:tool" glob, ...]  when given, only matching tools may be called
 *                                              (deny wins over allow);
 *   require_reason  ["server:tool" glob, ...]  a call to a matching tool must say why
 *                                              (intent.reason, not blank);
 *   max_args_bytes  integer                    calls whose arguments, as JSON, are longer
 *                                              are rejected (no bulk data into tools);
 *   warn_only       bool (default false)       warn and let the call through instead.
 *
 * Globs match "server:tool": '*' any run of characters (also none), '?' one character.
 * Every rule is optional; other keys (the intent_declaration switches every validator
 * receives) are ignored. Settings of the wrong shape reject every call with a message that
 * says which key is wrong (fail closed), also under warn_only.
 *
 * Built into a WebAssembly component of mcpproxy's validator-plugin world with clang,
 * wasi-libc, wit-bindgen and wasm-tools (see build.sh).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "validator_plugin.h"

#define NAME "tool-gate"
#define VERSION "0.1.0"

/* ---- strings ---------------------------------------------------------------------- */

/* A malloc'd, printf-formatted string, or NULL when out of memory. */
static char *format(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (n < 0) {
        return NULL;
    }
    char *out = malloc((size_t)n + 1);
    if (out == NULL) {
        return NULL;
    }
    va_start(args, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, args);
    va_end(args);
    return out;
}

/* Hands a malloc'd C string to the component ABI (which frees it after the call). */
static validator_plugin_string_t owned(char *s) {
    validator_plugin_string_t out = {(uint8_t *)s, s != NULL ? strlen(s) : 0};
    return out;
}

static validator_plugin_string_t copied(const char *s) {
    validator_plugin_string_t out;
    validator_plugin_string_dup(&out, s);
    return out;
}

/* ---- globs ------------------------------------------------------------------------ */

/* Length of the UTF-8 character starting at s (1 for a stray continuation byte). */
static size_t utf8_len(const unsigned char *s, size_t left) {
    size_t n = 1;
    if (*s >= 0xF0) {
        n = 4;
    } else if (*s >= 0xE0) {
        n = 3;
    } else if (*s >= 0xC0) {
        n = 2;
    }
    return n <= left ? n : left;
}

/* Whether text[0..len) matches pattern (NUL-terminated): '*' any run, '?' one character,
 * everything else itself. Iterative, with one backtrack point: linear in practice, never
 * exponential. */
static bool glob(const char *pattern, const char *text, size_t len) {
    const char *p = pattern;
    size_t t = 0;
    const char *star = NULL;
    size_t star_t = 0;
    while (t < len) {
        if (*p == '*') {
            star = ++p;
            star_t = t;
        } else if (*p == '?') {
            p++;
            t += utf8_len((const unsigned char *)text + t, len - t);
        } else if (*p != '\0' && *p == text[t]) {
            p++;
            t++;
        } else if (star != NULL) {
            p = star;
            star_t += utf8_len((const unsigned char *)text + star_t, len - star_t);
            t = star_t;
        } else {
            return false;
        }
    }
    while (*p == '*') {
        p++;
    }
    return *p == '\0';
}

/* ---- settings --------------------------------------------------------------------- */

typedef struct {
    json *root;
    const json *deny;           /* array of strings, or NULL */
    const json *allow;          /* array of strings, or NULL (no allow list) */
    const json *require_reason; /* array of strings, or NULL */
    bool has_max_args;
    uint64_t max_args_bytes;
    bool warn_only;
    bool broken; /* true until every key is checked */
} settings;

/* Reads and checks the settings. Returns a malloc'd reason when they are unusable (and
 * leaves s->broken set, also when out of memory, when the reason is NULL). */
static char *settings_problem(settings *s, const char *text, size_t len) {
    char why[200];
    memset(s, 0, sizeof *s);
    s->broken = true;
    s->root = json_parse(text, len, why, sizeof why);
    if (s->root == NULL) {
        return format("they are not valid JSON (%s)", why);
    }
    if (s->root->kind != JSON_OBJECT) {
        return format("they must be a JSON object, not %s", json_kind_name(s->root->kind));
    }
    const char *lists[] = {"deny", "allow", "require_reason"};
    const json **slots[] = {&s->deny, &s->allow, &s->require_reason};
    for (size_t i = 0; i < 3; i++) {
        const json *list = json_get(s->root, lists[i]);
        if (list == NULL || list->kind == JSON_NULL) {
            continue;
        }
        if (list->kind != JSON_ARRAY) {
            return format("%s must be a list of \"server:tool\" patterns, not %s", lists[i],
                          json_kind_name(list->kind));
        }
        for (size_t j = 0; j < list->count; j++) {
            const json *item = list->items[j];
            if (item->kind != JSON_STRING) {
                return format("%s[%zu] must be a \"server:tool\" pattern (a string), not %s",
                              lists[i], j, json_kind_name(item->kind));
            }
            if (strlen(item->str) != item->str_len) {
                return format("%s[%zu] holds a NUL character", lists[i], j);
            }
        }
        *slots[i] = list;
    }
    const json *max = json_get(s->root, "max_args_bytes");
    if (max != NULL && max->kind != JSON_NULL) {
        if (max->kind != JSON_NUMBER || max->number < 0 || max->number > 9007199254740992.0 ||
            max->number != (double)(uint64_t)max->number) {
            return format("max_args_bytes must be a whole number of bytes (0 or more)");
        }
        s->has_max_args = true;
        s->max_args_bytes = (uint64_t)max->number;
    }
    const json *warn = json_get(s->root, "warn_only");
    if (warn != NULL && warn->kind != JSON_NULL) {
        if (warn->kind != JSON_BOOL) {
            return format("warn_only must be true or false, not %s", json_kind_name(warn->kind));
        }
        s->warn_only = warn->boolean;
    }
    s->broken = false;
    return NULL;
}

/* The first pattern of list that matches tool, or NULL. */
static const char *first_match(const json *list, const char *tool, size_t len) {
    if (list == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < list->count; i++) {
        if (glob(list->items[i]->str, tool, len)) {
            return list->items[i]->str;
        }
    }
    return NULL;
}

static bool blank(const validator_plugin_string_t *s) {
    for (size_t i = 0; i < s->len; i++) {
        if (s->ptr[i] != ' ' && s->ptr[i] != '\t' && s->ptr[i] != '\n' && s->ptr[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* ---- the rules -------------------------------------------------------------------- */

/* Why the call must not go through (malloc'd), or NULL when it may. */
static char *judge(const settings *s, const exports_mcpproxy_plugin_validator_call_request_t *req,
                   const char *tool, size_t tool_len) {
    const char *rule = first_match(s->deny, tool, tool_len);
    if (rule != NULL) {
        return format("Tool '%s' is denied by " NAME "'s rule '%s'; use another tool, or ask "
                      "the operator to change plugins.settings." NAME ".deny",
                      tool, rule);
    }
    if (s->allow != NULL && first_match(s->allow, tool, tool_len) == NULL) {
        return format("Tool '%s' is not on " NAME "'s allow list; use a listed tool, or ask "
                      "the operator to add it to plugins.settings." NAME ".allow",
                      tool);
    }
    rule = first_match(s->require_reason, tool, tool_len);
    if (rule != NULL) {
        const mcpproxy_plugin_types_option_intent_t *intent = &req->intent;
        if (!intent->is_some || !intent->val.reason.is_some || blank(&intent->val.reason.val)) {
            return format("Tool '%s' needs a reason (" NAME "'s rule '%s'): call it again with "
                          "intent_reason saying why",
                          tool, rule);
        }
    }
    if (s->has_max_args && (uint64_t)req->args_json.len > s->max_args_bytes) {
        return format("The arguments of tool '%s' are %zu bytes, over " NAME "'s limit of "
                      "%llu; send less, e.g. a reference to the data instead of the data",
                      tool, req->args_json.len, (unsigned long long)s->max_args_bytes);
    }
    return NULL;
}

static void answer(exports_mcpproxy_plugin_validator_verdict_t *ret, uint8_t tag, char *message) {
    if (message == NULL) {
        /* Out of memory while writing the message: still refuse, with a constant. */
        message = format("%s", NAME ": out of memory");
    }
    validator_plugin_string_t text = message != NULL ? owned(message) : copied(NAME);
    mcpproxy_plugin_host_log(MCPPROXY_PLUGIN_HOST_LOG_LEVEL_DEBUG, &text);
    ret->tag = tag;
    if (tag == MCPPROXY_PLUGIN_TYPES_VERDICT_WARN) {
        ret->val.warn = text;
    } else {
        ret->val.reject = text;
    }
}

/* ---- the exports ------------------------------------------------------------------ */

void exports_mcpproxy_plugin_metadata_info(exports_mcpproxy_plugin_metadata_plugin_info_t *ret) {
    ret->name = copied(NAME);
    ret->version = copied(VERSION);
    ret->description = copied("Denies, allow-lists or asks a reason for tools by "
                              "server:tool pattern, and caps argument size");
}

void exports_mcpproxy_plugin_validator_validate(
    exports_mcpproxy_plugin_validator_call_request_t *request,
    exports_mcpproxy_plugin_validator_verdict_t *ret) {
    /* "server:tool", built by hand: names are not NUL-terminated (and could hold a NUL). */
    const validator_plugin_string_t *server = &request->tool.server, *name = &request->tool.name;
    size_t tool_len = server->len + 1 + name->len;
    char *tool = malloc(tool_len + 1);
    if (tool != NULL) {
        memcpy(tool, server->ptr, server->len);
        tool[server->len] = ':';
        memcpy(tool + server->len + 1, name->ptr, name->len);
        tool[tool_len] = '\0';
    }
    validator_plugin_string_t config;
    mcpproxy_plugin_host_config(&config);
    settings s;
    char *problem = settings_problem(&s, (const char *)config.ptr, config.len);
    validator_plugin_string_free(&config);

    if (tool == NULL) {
        answer(ret, MCPPROXY_PLUGIN_TYPES_VERDICT_REJECT, NULL);
    } else if (s.broken) {
        answer(ret, MCPPROXY_PLUGIN_TYPES_VERDICT_REJECT,
               problem == NULL ? NULL
                               : format(NAME ": invalid settings: %s; fix plugins.settings." NAME
                                             " in mcp_config.json",
                                        problem));
    } else {
        char *why = judge(&s, request, tool, tool_len);
        if (why == NULL) {
            ret->tag = MCPPROXY_PLUGIN_TYPES_VERDICT_ALLOW;
        } else {
            answer(ret,
                   s.warn_only ? MCPPROXY_PLUGIN_TYPES_VERDICT_WARN
                               : MCPPROXY_PLUGIN_TYPES_VERDICT_REJECT,
                   why);
        }
    }
    free(problem);
    free(tool);
    json_free(s.root);
    exports_mcpproxy_plugin_validator_call_request_free(request);
}
