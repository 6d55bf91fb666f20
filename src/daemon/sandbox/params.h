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
/* How a configuration's variable shows in a sandbox object. */
#define SANDBOX_ENV_MASK "********"
/* Where the bundle a sandbox of a configuration with inject rules trusts is written,
 * beneath the workspace, and where the sandbox sees it. */
#define SANDBOX_TRUST_FILE ".sbx-egress-ca.pem"
#define SANDBOX_TRUST_PATH "/workspace/" SANDBOX_TRUST_FILE
/* The directory whose files come back as artifacts; every new workspace has it (spec 000's
 * examples write out/... without creating it). */
#define SANDBOX_OUT_DIR "out"
/* The desktop template's noVNC port (docs/templates.md), which a configuration with
 * desktop_enabled false keeps closed to preview links. */
#define SANDBOX_DESKTOP_PORT 6080

struct sandbox_params {
    const char *template_name; /* validated name */
    long long ttl_seconds;
    json_t *env;                 /* validated object of strings, borrowed */
    bool enable_default_session; /* docs/sessions.md */
    struct egress_policy egress; /* docs/egress.md */
    const char *backend;         /* "v1", "v2" or NULL (v2 when this host can, else v1) */
    const char *snapshot_id;     /* a v1 workspace snapshot to start from, or NULL */
    /* Sandbox configurations (docs/configs.md). */
    const char *config_id; /* make it from this configuration, or NULL */
    bool config_applied;   /* the fields below already come from it (manager_set_config_fn) */
    bool template_given, ttl_given;
    long long memory_mb, pids, cpu_millicores; /* "limits" asked for; 0: the default */
    json_t *network;               /* set from the configuration: what its egress gets, borrowed */
    json_t *config_env;            /* ... its variables in clear, borrowed: never stored so */
    json_t *config_inject;         /* ... its inject rules' headers in clear, borrowed */
    const char *config_env_sealed; /* ... both sealed, for the store */
    const char *trust_pem;         /* a CA bundle to write to SANDBOX_TRUST_FILE in the workspace */
    long long terminal_idle_sec;   /* ... its terminals' idle limit; 0: the daemon's */
    long long command_timeout_sec; /* ... its commands' default timeout; 0: the built-in */
    bool desktop_disabled;         /* ... no preview link to SANDBOX_DESKTOP_PORT */
    const char *runtime; /* an execution backend (docs/runtime.md), or NULL: the default */
    json_t *volumes;     /* [{volume, path, read_only?}] checked (docs/volumes.md), borrowed */
    json_t *docker;      /* the configuration's docker object (config_docker.c), borrowed */
    json_t *provider;    /* its e2b/cube connection, api_key in clear (config_provider.c),
                            borrowed */
    /* Skills installed into its configuration (docs/skills.md): the workspace to start
     * from (an image or a tree, as snapshot_workspace_copy made it), and what writes the
     * skills into the new workspace before the sandbox starts. */
    const char *workspace_from;
    int (*workspace_fill)(void *data, const char *workspace, struct sbx_err *err);
    void *workspace_fill_data;
    const char *build_rootfs; /* manager_create_build's writable tree, else NULL */
};

/* Checks shared by create and run. */
int sandbox_params_parse(json_t *body, struct sandbox_params *out, struct sbx_err *err);
/* env: an object of at most SANDBOX_ENV_MAX strings with valid, unreserved names (NULL is
 * fine); field names it in the error. */
int sandbox_env_validate(json_t *env, const char *field, struct sbx_err *err);
/* ["K=V", ...] for the agent: a sandbox's env (object) overlaid by a request's. */
json_t *sandbox_env_list(json_t *sandbox_env, json_t *extra);

#endif
