#include "router.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../routes.h"
#include "../auth/auth.h"
#include "../sbxd.h"
#include "../store/store.h"
#include "server.h"

enum route_auth {
    AUTH_PUBLIC,  /* no key */
    AUTH_KEY,     /* any valid key */
    AUTH_SANDBOX, /* a key with tool level "sandbox" */
    AUTH_ADMIN,   /* an admin key */
};

struct route {
    const char *method;
    const char *pattern; /* segments; "{}" captures one segment */
    enum route_auth auth;
    api_handler handler;
};

/* Literal segments before captures: /v1/sandboxes/run must win over /v1/sandboxes/{}. */
static const struct route routes[] = {
    {"GET", "/healthz", AUTH_PUBLIC, api_health},
    {"POST", "/v1/keys", AUTH_ADMIN, api_keys_create},
    {"GET", "/v1/keys", AUTH_ADMIN, api_keys_list},
    {"DELETE", "/v1/keys/{}", AUTH_ADMIN, api_keys_delete},
    {"GET", "/v1/audit/verify", AUTH_ADMIN, api_audit_verify},
    {"GET", "/v1/audit", AUTH_KEY, api_audit_list},
    {"POST", "/v1/sandboxes/run", AUTH_SANDBOX, api_run},
    {"POST", "/v1/sandboxes", AUTH_SANDBOX, api_sandboxes_create},
    {"GET", "/v1/sandboxes", AUTH_SANDBOX, api_sandboxes_list},
    {"GET", "/v1/sandboxes/{}", AUTH_SANDBOX, api_sandboxes_get},
    {"DELETE", "/v1/sandboxes/{}", AUTH_SANDBOX, api_sandboxes_delete},
    {"POST", "/v1/sandboxes/{}/exec", AUTH_SANDBOX, api_exec},
    {"POST", "/v1/sandboxes/{}/pause", AUTH_SANDBOX, api_sandbox_pause},
    {"POST", "/v1/sandboxes/{}/resume", AUTH_SANDBOX, api_sandbox_resume},
    {"POST", "/v1/sandboxes/{}/fork", AUTH_SANDBOX, api_sandbox_fork},
    {"POST", "/v1/sandboxes/{}/snapshot", AUTH_SANDBOX, api_sandbox_snapshot},
    {"POST", "/v1/sandboxes/{}/sessions", AUTH_SANDBOX, api_sessions_create},
    {"GET", "/v1/sandboxes/{}/sessions", AUTH_SANDBOX, api_sessions_list},
    {"DELETE", "/v1/sandboxes/{}/sessions/{}", AUTH_SANDBOX, api_sessions_delete},
    {"POST", "/v1/sandboxes/{}/processes", AUTH_SANDBOX, api_processes_start},
    {"GET", "/v1/sandboxes/{}/processes", AUTH_SANDBOX, api_processes_list},
    {"GET", "/v1/sandboxes/{}/processes/{}", AUTH_SANDBOX, api_processes_get},
    {"DELETE", "/v1/sandboxes/{}/processes/{}", AUTH_SANDBOX, api_processes_kill},
    {"GET", "/v1/sandboxes/{}/processes/{}/logs", AUTH_SANDBOX, api_processes_logs},
    {"POST", "/v1/sandboxes/{}/processes/{}/signal", AUTH_SANDBOX, api_processes_signal},
    {"GET", "/v1/sandboxes/{}/egress", AUTH_SANDBOX, api_egress_get},
    {"PUT", "/v1/sandboxes/{}/egress", AUTH_SANDBOX, api_egress_put},
    {"POST", "/v1/sandboxes/{}/run_code", AUTH_SANDBOX, api_run_code},
    {"POST", "/v1/sandboxes/{}/kernel/reset", AUTH_SANDBOX, api_kernel_reset},
    {"POST", "/v1/sandboxes/{}/kernel/interrupt", AUTH_SANDBOX, api_kernel_interrupt},
    {"GET", "/v1/sandboxes/{}/files", AUTH_SANDBOX, api_files_list},
    {"PUT", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_put},
    {"GET", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_get},
    {"DELETE", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_delete},
    {"GET", "/v1/sandboxes/{}/artifacts", AUTH_SANDBOX, api_artifacts_list},
    /* Signed links: the signature in the query is the credential. */
    {"GET", "/v1/sandboxes/{}/artifacts/{*}", AUTH_PUBLIC, api_artifacts_download},
    {"GET", "/v1/sandboxes/{}/execs/{}", AUTH_SANDBOX, api_exec_get},
    {"POST", "/v1/sandboxes/{}/terminal-ticket", AUTH_SANDBOX, api_terminal_ticket},
    /* A WebSocket: the single-use ticket in the query is the credential. */
    {"GET", "/v1/sandboxes/{}/terminal", AUTH_PUBLIC, api_terminal_connect},
    {"POST", "/v1/sandboxes/{}/pty", AUTH_SANDBOX, api_pty_create},
    {"GET", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_read},
    {"DELETE", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_delete},
    {"POST", "/v1/sandboxes/{}/pty/{}/input", AUTH_SANDBOX, api_pty_input},
    {"POST", "/v1/sandboxes/{}/preview", AUTH_SANDBOX, api_preview_create},
};

bool router_match(const char *pattern, const char *path, struct http_req *req)
{
    unsigned nparam = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return false;
        p++;
        s++;
        const char *pe = strchrnul(p, '/');
        const char *se = strchrnul(s, '/');
        if (pe - p == 3 && !strncmp(p, "{*}", 3) && !*pe) {
            /* The rest of the path, slashes included. */
            if (!*s)
                return false;
            if (req)
                http_req_set_param(req, nparam, s, strlen(s));
            return true;
        }
        if (pe - p == 2 && !strncmp(p, "{}", 2)) {
            if (se == s)
                return false;
            if (req)
                http_req_set_param(req, nparam, s, (size_t)(se - s));
            nparam++;
        } else if (pe - p != se - s || strncmp(p, s, (size_t)(pe - p))) {
            return false;
        }
        p = pe;
        s = se;
    }
    return !*p && !*s;
}

static int authenticate(struct sbxd *d, struct http_req *req, enum route_auth need,
                        struct sbx_err *err)
{
    const char *h = http_req_header(req, "Authorization");
    if (!h || !*h)
        return sbx_err_set(err, EACCES, "missing_api_key",
                           "send your key as Authorization: Bearer sbx_...");
    if (strncasecmp(h, "Bearer ", 7))
        return sbx_err_set(err, EACCES, "invalid_api_key",
                           "the Authorization header must be Bearer <key>");
    const char *key = h + 7;
    while (*key == ' ')
        key++;
    char key_id[AUTH_KEY_ID_LEN + 1];
    int r = auth_key_parse(key, key_id, err);
    if (r < 0)
        return r;
    struct store_key k;
    struct sbx_err lerr = {0};
    r = store_key_get(d->store, key_id, &k, &lerr);
    char hash[AUTH_HASH_HEX_LEN + 1];
    auth_key_hash(key, hash);
    if (r == -ENOENT || (r == 0 && !auth_hash_equal(hash, k.hash)))
        return sbx_err_set(err, EACCES, "invalid_api_key", "the API key is not valid");
    if (r < 0) {
        *err = lerr;
        return r;
    }
    struct auth_identity *id = http_req_identity(req);
    id->authenticated = true;
    snprintf(id->key_id, sizeof(id->key_id), "%s", k.id);
    snprintf(id->user, sizeof(id->user), "%s", k.user);
    id->role = k.role;
    id->tool_level = k.tool_level;
    if (need == AUTH_ADMIN && k.role != AUTH_ROLE_ADMIN)
        return sbx_err_set(err, EPERM, "admin_required", "this route needs an admin key");
    if (need == AUTH_SANDBOX && k.tool_level < AUTH_TOOL_SANDBOX)
        return sbx_err_set(err, EPERM, "insufficient_tool_level",
                           "sandbox routes need a key with tool level \"sandbox\"");
    return 0;
}

/* Routes dispatched right after the headers, whose handler takes the body as a
 * stream (uploads) instead of the 1 MiB buffer. */
static const struct {
    const char *method, *pattern;
} streamed[] = {
    {"PUT", "/v1/sandboxes/{}/files/{*}"},
};

bool router_streams_body(void *app, const struct http_req *req)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(streamed); i++)
        if (!strcmp(streamed[i].method, http_req_method(req)) &&
            router_match(streamed[i].pattern, http_req_path(req), NULL))
            return true;
    return false;
}

void router_dispatch(void *app, struct http_req *req)
{
    struct sbxd *d = app;
    const char *method = http_req_method(req);
    const char *path = http_req_path(req);
    bool path_known = false;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(routes); i++) {
        const struct route *rt = &routes[i];
        if (!router_match(rt->pattern, path, NULL))
            continue;
        path_known = true;
        if (strcmp(rt->method, method))
            continue;
        (void)router_match(rt->pattern, path, req);
        if (rt->auth != AUTH_PUBLIC) {
            struct sbx_err err = {0};
            if (authenticate(d, req, rt->auth, &err) < 0) {
                http_respond_error(req, &err);
                return;
            }
        }
        rt->handler(d, req);
        return;
    }
    if (path_known)
        http_respond_errorf(req, "method_not_allowed", "%s is not allowed on %s", method, path);
    else
        http_respond_errorf(req, "not_found", "no route for %s %s", method, path);
}
