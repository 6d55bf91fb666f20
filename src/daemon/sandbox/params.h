/* What a create (or a run) asks for, checked at the boundary: template, TTL, env,
 * egress, backend, runtime. Shared by the sandbox routes, run and every other way in. */
#ifndef SBX_SANDBOX_PARAMS_H
#define SBX_SANDBOX_PARAMS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../egress/policy.h"

#define SANDBOX_TTL_DEFAULT 3600
#define SANDBOX_TTL_MAX 86400
#define SANDBOX_ENV_MAX 128
#define SANDBOX_ENV_VALUE_MAX (32 * 1024)

struct sandbox_params {
    const char *template_name; /* validated name */
    long long ttl_seconds;
    json_t *env;                 /* validated object of strings, borrowed */
    bool enable_default_session; /* docs/sessions.md */
    struct egress_policy egress; /* docs/egress.md */
    const char *backend;         /* "v1", "v2" or NULL (v2 when this host can, else v1) */
    const char *snapshot_id;     /* a v1 workspace snapshot to start from, or NULL */
    const char *runtime;         /* an execution backend (docs/runtime.md), or NULL: the default */
};

/* Checks shared by create and run. */
int sandbox_params_parse(json_t *body, struct sandbox_params *out, struct sbx_err *err);
/* env: an object of at most SANDBOX_ENV_MAX strings with valid, unreserved names (NULL is
 * fine); field names it in the error. */
int sandbox_env_validate(json_t *env, const char *field, struct sbx_err *err);
/* ["K=V", ...] for the agent: a sandbox's env (object) overlaid by a request's. */
json_t *sandbox_env_list(json_t *sandbox_env, json_t *extra);

#endif
