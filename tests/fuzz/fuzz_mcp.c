/* libFuzzer target for the MCP server's JSON-RPC intake (mcp_msg_parse in
 * src/daemon/mcp/mcp.c): every body POSTed to /mcp goes through it before any method
 * runs.
 *
 * Input: the body. Invariants: an accepted message is a JSON-RPC 2.0 object; a request
 * (it has a method and an id) has a string or integer id, and the method it names is the
 * message's own; a refusal is one of JSON-RPC's parse or invalid-request codes with a
 * message; nothing leaks either way.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/mcp/mcp.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *body = malloc(size ? size : 1);
    memcpy(body, data, size);
    struct mcp_msg m;
    int code = 0;
    const char *why = NULL;
    if (mcp_msg_parse(body, size, &m, &code, &why) == 0) {
        REQUIRE(json_is_object(m.doc));
        REQUIRE(!strcmp(json_string_value(json_object_get(m.doc, "jsonrpc")), "2.0"));
        REQUIRE(m.id == json_object_get(m.doc, "id"));
        REQUIRE(m.params == json_object_get(m.doc, "params"));
        REQUIRE(m.method == json_string_value(json_object_get(m.doc, "method")));
        REQUIRE(m.is_request == (m.method && m.id));
        REQUIRE(!m.is_request || json_is_string(m.id) || json_is_integer(m.id));
        json_decref(m.doc);
    } else {
        REQUIRE(code == -32700 || code == -32600);
        REQUIRE(why && why[0]);
    }
    free(body);
    return 0;
}
