/* A small JSON reader for the plugin's settings (host.config() hands them over as JSON text).
 *
 * json_parse builds a tree of json values; json_free releases it. Strings are decoded
 * (escapes, \uXXXX with surrogate pairs, to UTF-8) and NUL-terminated, with their length
 * kept, so a string holding \u0000 is not cut short. Nesting is limited to JSON_MAX_DEPTH.
 */
#ifndef TOOL_GATE_JSON_H
#define TOOL_GATE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define JSON_MAX_DEPTH 64

typedef enum {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_kind;

typedef struct json json;

struct json {
    json_kind kind;
    bool boolean;   /* JSON_BOOL */
    double number;  /* JSON_NUMBER */
    char *str;      /* JSON_STRING: NUL-terminated, str_len bytes */
    size_t str_len;
    json **items;   /* JSON_ARRAY and JSON_OBJECT: count values */
    char **keys;    /* JSON_OBJECT: count NUL-terminated keys, key_lens[i] bytes each */
    size_t *key_lens;
    size_t count;
};

/* Parses text[0..len). On failure returns NULL and writes why (with the byte offset) into
 * err (err_len bytes, always NUL-terminated). */
json *json_parse(const char *text, size_t len, char *err, size_t err_len);

/* Frees a tree from json_parse; NULL is fine. */
void json_free(json *value);

/* The member `key` of an object, or NULL (also when obj is not an object). */
const json *json_get(const json *obj, const char *key);

/* The name of a kind, for messages: "a string", "an array", ... */
const char *json_kind_name(json_kind kind);

#endif
