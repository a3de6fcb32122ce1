/* The JSON reader of json.h: a recursive-descent parser over a byte range, strict about
 * the grammar (RFC 8259), bounded in depth, and careful with memory (every failure path
 * frees what it built). */
#include "json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *start;
    const char *p;
    const char *end;
    char *err;
    size_t err_len;
    int depth;
} parser;

static json *parse_value(parser *ps);

static void fail(parser *ps, const char *fmt, ...) {
    if (ps->err_len == 0 || ps->err[0] != '\0') {
        return; /* keep the first (innermost) reason */
    }
    char what[160];
    va_list args;
    va_start(args, fmt);
    vsnprintf(what, sizeof what, fmt, args);
    va_end(args);
    snprintf(ps->err, ps->err_len, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
        ps->p++;
    }
}

static json *new_value(parser *ps, json_kind kind) {
    json *v = calloc(1, sizeof *v);
    if (v == NULL) {
        fail(ps, "out of memory");
        return NULL;
    }
    v->kind = kind;
    return v;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        fail(ps, "unexpected character '%c'", *ps->p);
        return false;
    }
    ps->p += n;
    return true;
}

/* A growable byte buffer for decoded strings. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} buffer;

static bool push(parser *ps, buffer *b, const char *bytes, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            fail(ps, "out of memory");
            return false;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

static int hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) {
        fail(ps, "truncated \\u escape");
        return 0;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (uint32_t)(c - 'A' + 10);
        } else {
            fail(ps, "bad \\u escape");
            return 0;
        }
    }
    ps->p += 4;
    *out = v;
    return 1;
}

static bool push_utf8(parser *ps, buffer *b, uint32_t cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return push(ps, b, out, n);
}

/* Parses a string (ps->p at the opening quote) into a fresh NUL-terminated buffer. */
static char *parse_string(parser *ps, size_t *len) {
    buffer b = {0};
    ps->p++; /* the opening quote */
    if (!push(ps, &b, "", 0)) {
        return NULL;
    }
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            *len = b.len;
            return b.data;
        }
        if (c < 0x20) {
            fail(ps, "control character in a string");
            break;
        }
        if (c != '\\') {
            const char *run = ps->p;
            while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' &&
                   (unsigned char)*ps->p >= 0x20) {
                ps->p++;
            }
            if (!push(ps, &b, run, (size_t)(ps->p - run))) {
                break;
            }
            continue;
        }
        ps->p++;
        if (ps->p >= ps->end) {
            break;
        }
        char e = *ps->p++;
        const char *simple = NULL;
        switch (e) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': break;
        default:
            ps->p--;
            fail(ps, "bad escape '\\%c'", e);
            free(b.data);
            return NULL;
        }
        if (simple != NULL) {
            if (!push(ps, &b, simple, 1)) {
                break;
            }
            continue;
        }
        uint32_t cp;
        if (!hex4(ps, &cp)) {
            break;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low;
            if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                fail(ps, "lone surrogate in a \\u escape");
                break;
            }
            ps->p += 2;
            if (!hex4(ps, &low)) {
                break;
            }
            if (low < 0xDC00 || low > 0xDFFF) {
                fail(ps, "lone surrogate in a \\u escape");
                break;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(ps, "lone surrogate in a \\u escape");
            break;
        }
        if (!push_utf8(ps, &b, cp)) {
            break;
        }
    }
    fail(ps, "unterminated string");
    free(b.data);
    return NULL;
}

static json *parse_number(parser *ps) {
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-') {
        ps->p++;
    }
    const char *digits = ps->p;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        ps->p++;
    }
    if (ps->p == digits || (*digits == '0' && ps->p - digits > 1)) {
        ps->p = s;
        fail(ps, "bad number");
        return NULL;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        const char *frac = ps->p;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            ps->p++;
        }
        if (ps->p == frac) {
            fail(ps, "bad number");
            return NULL;
        }
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) {
            ps->p++;
        }
        const char *exp = ps->p;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            ps->p++;
        }
        if (ps->p == exp) {
            fail(ps, "bad number");
            return NULL;
        }
    }
    /* strtod needs a NUL-terminated copy: the text is a slice of a longer string. */
    size_t n = (size_t)(ps->p - s);
    char local[64];
    char *copy = n < sizeof local ? local : malloc(n + 1);
    if (copy == NULL) {
        fail(ps, "out of memory");
        return NULL;
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    json *v = new_value(ps, JSON_NUMBER);
    if (v != NULL) {
        v->number = strtod(copy, NULL);
    }
    if (copy != local) {
        free(copy);
    }
    return v;
}

/* Appends item (and key, for objects) to a container; frees them on failure. */
static bool append(parser *ps, json *container, json *item, char *key, size_t key_len) {
    size_t n = container->count + 1;
    json **items = realloc(container->items, n * sizeof *items);
    if (items != NULL) {
        container->items = items;
    }
    if (items != NULL && container->kind == JSON_OBJECT) {
        char **keys = realloc(container->keys, n * sizeof *keys);
        if (keys != NULL) {
            container->keys = keys;
        }
        size_t *lens = keys != NULL ? realloc(container->key_lens, n * sizeof *lens) : NULL;
        if (lens != NULL) {
            container->key_lens = lens;
        }
        if (keys == NULL || lens == NULL) {
            items = NULL;
        } else {
            keys[n - 1] = key;
            lens[n - 1] = key_len;
        }
    }
    if (items == NULL) {
        fail(ps, "out of memory");
        json_free(item);
        free(key);
        return false;
    }
    items[n - 1] = item;
    container->count = n;
    return true;
}

static json *parse_container(parser *ps, json_kind kind) {
    char close = kind == JSON_OBJECT ? '}' : ']';
    if (++ps->depth > JSON_MAX_DEPTH) {
        fail(ps, "nested deeper than %d levels", JSON_MAX_DEPTH);
        return NULL;
    }
    ps->p++; /* '{' or '[' */
    json *c = new_value(ps, kind);
    if (c == NULL) {
        return NULL;
    }
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return c;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        skip_ws(ps);
        if (kind == JSON_OBJECT) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a string key");
                break;
            }
            key = parse_string(ps, &key_len);
            if (key == NULL) {
                break;
            }
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "expected ':'");
                free(key);
                break;
            }
            ps->p++;
        }
        json *item = parse_value(ps);
        if (item == NULL) {
            free(key);
            break;
        }
        if (!append(ps, c, item, key, key_len)) {
            break;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return c;
        }
        fail(ps, "expected ',' or '%c'", close);
        break;
    }
    json_free(c);
    return NULL;
}

static json *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end of input");
        return NULL;
    }
    switch (*ps->p) {
    case '{':
        return parse_container(ps, JSON_OBJECT);
    case '[':
        return parse_container(ps, JSON_ARRAY);
    case '"': {
        size_t len;
        char *s = parse_string(ps, &len);
        if (s == NULL) {
            return NULL;
        }
        json *v = new_value(ps, JSON_STRING);
        if (v == NULL) {
            free(s);
            return NULL;
        }
        v->str = s;
        v->str_len = len;
        return v;
    }
    case 't':
    case 'f': {
        bool truth = *ps->p == 't';
        if (!literal(ps, truth ? "true" : "false")) {
            return NULL;
        }
        json *v = new_value(ps, JSON_BOOL);
        if (v != NULL) {
            v->boolean = truth;
        }
        return v;
    }
    case 'n':
        return literal(ps, "null") ? new_value(ps, JSON_NULL) : NULL;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
            return parse_number(ps);
        }
        fail(ps, "unexpected character '%c'", *ps->p);
        return NULL;
    }
}

json *json_parse(const char *text, size_t len, char *err, size_t err_len) {
    parser ps = {text, text, text + len, err, err_len, 0};
    if (err_len > 0) {
        err[0] = '\0';
    }
    json *v = parse_value(&ps);
    if (v == NULL) {
        return NULL;
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "unexpected text after the value");
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(json *value) {
    if (value == NULL) {
        return;
    }
    for (size_t i = 0; i < value->count; i++) {
        json_free(value->items[i]);
        if (value->keys != NULL) {
            free(value->keys[i]);
        }
    }
    free(value->items);
    free(value->keys);
    free(value->key_lens);
    free(value->str);
    free(value);
}

const json *json_get(const json *obj, const char *key) {
    if (obj == NULL || obj->kind != JSON_OBJECT) {
        return NULL;
    }
    size_t n = strlen(key);
    /* The last of duplicate keys wins, as in most JSON libraries. */
    for (size_t i = obj->count; i-- > 0;) {
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) {
            return obj->items[i];
        }
    }
    return NULL;
}

const char *json_kind_name(json_kind kind) {
    switch (kind) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "a value";
}
