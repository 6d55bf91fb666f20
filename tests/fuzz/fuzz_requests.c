/* libFuzzer target for the daemon's request validation: every body a client can send
 * to create, run and exec goes through jansson and then these checks. Whatever the
 * input, they must either accept it with sane values or refuse it with an API error
 * code that maps to a 4xx status.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/exec/exec.h"
#include "../../src/daemon/http/errors.h"
#include "../../src/daemon/sandbox/manager.h"
#include "fuzz.h"

static void refused_with_4xx(const struct sbx_err *err)
{
    unsigned status = http_status_for_code(err->code);
    REQUIRE(status >= 400 && status < 500);
    REQUIRE(err->msg[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!body || !json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    struct sbx_err err = {0};
    struct sandbox_params sp;
    if (sandbox_params_parse(body, &sp, &err) == 0) {
        REQUIRE(sp.ttl_seconds >= 1 && sp.ttl_seconds <= SANDBOX_TTL_MAX);
        REQUIRE(sp.template_name && *sp.template_name);
        REQUIRE(!sp.env || json_is_object(sp.env));
    } else {
        refused_with_4xx(&err);
    }
    sbx_err_clear(&err);
    struct exec_params ep;
    if (exec_params_parse(body, EXEC_TIMEOUT_MAX, &ep, &err) == 0) {
        REQUIRE(json_is_array(ep.argv) && json_array_size(ep.argv) == 3);
        REQUIRE(ep.timeout_s >= 1 && ep.timeout_s <= EXEC_TIMEOUT_MAX);
        REQUIRE(ep.cwd && *ep.cwd);
        exec_params_clear(&ep);
    } else {
        refused_with_4xx(&err);
    }
    json_decref(body);
    return 0;
}
