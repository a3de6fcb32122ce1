// {{name}}: an mcpproxy validator in C. Rejects calls to the tools its settings block:
// {"blocked_tools": ["server:tool", ...]}.
//
// The types and function names below are what `wit-bindgen c` generates for the world
// `{{world}}` into gen/{{world_c}}.h (build.sh runs it): read that header for the rest.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "{{world_c}}.h"

// Sets `out` to a copy of the C string `text`.
static void set_string({{world_c}}_string_t *out, const char *text) {
    {{world_c}}_string_dup(out, text);
}

void exports_mcpproxy_plugin_metadata_info(exports_mcpproxy_plugin_metadata_plugin_info_t *ret) {
    set_string(&ret->name, "{{name}}");
    set_string(&ret->version, "0.1.0");
    set_string(&ret->description, "Rejects calls to the tools its settings block");
}

// Whether `haystack` (not NUL-terminated) holds `needle`.
static int contains(const uint8_t *haystack, size_t len, const char *needle) {
    size_t n = strlen(needle);
    if (n == 0 || n > len) {
        return 0;
    }
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(haystack + i, needle, n) == 0) {
            return 1;
        }
    }
    return 0;
}

void exports_mcpproxy_plugin_validator_validate(
    exports_mcpproxy_plugin_validator_call_request_t *request,
    exports_mcpproxy_plugin_validator_verdict_t *ret) {
    // "server:tool", quoted as it appears in the settings' JSON.
    size_t size = request->tool.server.len + request->tool.name.len + 4;
    char *quoted = malloc(size);
    if (quoted == NULL) {
        ret->tag = MCPPROXY_PLUGIN_TYPES_VERDICT_REJECT;
        set_string(&ret->val.reject, "{{name}}: out of memory");
        exports_mcpproxy_plugin_validator_call_request_free(request);
        return;
    }
    snprintf(quoted, size, "\"%.*s:%.*s\"", (int)request->tool.server.len,
             (const char *)request->tool.server.ptr, (int)request->tool.name.len,
             (const char *)request->tool.name.ptr);

    {{world_c}}_string_t settings;
    mcpproxy_plugin_host_config(&settings);
    // A plain search of the settings' text; parse it with a JSON library (cJSON, jsmn)
    // when your settings grow.
    int blocked = contains(settings.ptr, settings.len, "\"blocked_tools\"") &&
                  contains(settings.ptr, settings.len, quoted);
    if (blocked) {
        char message[512];
        snprintf(message, sizeof message,
                 "Tool '%.*s:%.*s' is blocked by {{name}}; ask an operator to unblock it",
                 (int)request->tool.server.len, (const char *)request->tool.server.ptr,
                 (int)request->tool.name.len, (const char *)request->tool.name.ptr);
        ret->tag = MCPPROXY_PLUGIN_TYPES_VERDICT_REJECT;
        set_string(&ret->val.reject, message);
    } else {
        ret->tag = MCPPROXY_PLUGIN_TYPES_VERDICT_ALLOW;
    }
    {{world_c}}_string_free(&settings);
    free(quoted);
    exports_mcpproxy_plugin_validator_call_request_free(request);
}
