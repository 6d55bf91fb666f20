/* libFuzzer target for the Connect request decoder of the E2B surface (rpc_decode in
 * src/daemon/e2b/e2b_connect.c): the body of every envd call the e2b SDK makes.
 *
 * Input: byte 0 chooses a unary call (even) or a server-stream call (odd), the rest is the
 * body. Invariants: an accepted body gives a JSON object; a stream call is accepted only
 * as exactly one uncompressed envelope (flags 0, a length that is the rest of the body);
 * a refusal is invalid_request, which maps to a 4xx, and rpc_code maps it to a Connect
 * code.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/e2b/e2b_connect.h"
#include "../../src/daemon/http/errors.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool streaming = data[0] & 1;
    size_t n = size - 1;
    /* A private copy of exactly n bytes, so ASan sees any read past the body. */
    char *body = malloc(n ? n : 1);
    memcpy(body, data + 1, n);
    json_t *msg = NULL;
    struct sbx_err err = {0};
    if (rpc_decode(body, n, streaming, &msg, &err) == 0) {
        REQUIRE(json_is_object(msg));
        if (streaming) {
            const uint8_t *h = (const uint8_t *)body;
            REQUIRE(n >= 5 && h[0] == 0);
            REQUIRE(((size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4]) == n - 5);
        }
        json_decref(msg);
    } else {
        REQUIRE(!msg && !strcmp(err.code, "invalid_request"));
        unsigned status = http_status_for_code(err.code);
        REQUIRE(status >= 400 && status < 500);
        REQUIRE(!strcmp(rpc_code(&err), "invalid_argument"));
    }
    free(body);
    return 0;
}
