/* POST/GET /v1/sandboxes/{id}/sessions, DELETE /v1/sandboxes/{id}/sessions/{sid}
 * (docs/sessions.md). Sessions live in the agent; these routes ask it. */
#include <errno.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/runas.h"
#include "../sbxd.h"
#include "exec.h"
#include "session.h"

struct session_req {
    struct http_req *req;
    struct agentcall *call;
    bool is_default; /* answers describe the default session as such */
    unsigned status; /* on success */
    /* A change (create, delete) is audited once the agent answered. */
    const char *action;
    struct store *store;
    char sandbox_id[STORE_ID_MAX + 1];
    char session_id[64];
};

static void on_abort(struct http_req *req, void *data)
{
    struct session_req *x = data;
    agentcall_cancel(x->call, false);
    free(x);
}

static void decorate(json_t *s, bool enable_default)
{
    const char *id = json_string_value(json_object_get(s, "id"));
    json_object_set_new(s, "object", json_string("session"));
    json_object_set_new(s, "default",
                        json_boolean(enable_default && id && !strcmp(id, SESSION_DEFAULT_ID)));
}

static void on_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct session_req *x = data;
    if (x->action)
        audit_record(x->store, http_req_identity(x->req), NULL, http_req_id(x->req), x->action,
                     x->sandbox_id, err ? err->code : "ok",
                     json_pack("{s:s}", "session_id", x->session_id));
    if (err) {
        http_respond_error(x->req, err);
    } else {
        json_t *o = json_deep_copy(result);
        json_t *list = json_object_get(o, "sessions");
        if (list) {
            size_t i;
            json_t *s;
            json_array_foreach(list, i, s) decorate(s, x->is_default);
            json_t *page = json_pack("{s:s,s:O}", "object", "list", "data", list);
            json_decref(o);
            o = page;
        } else if (json_object_get(o, "deleted")) {
            json_object_set_new(o, "object", json_string("session"));
        } else {
            decorate(o, x->is_default);
        }
        http_respond_json(x->req, x->status, o);
    }
    free(x);
}

static const struct agentcall_ops call_ops = {.on_done = on_done};

/* Suspend req and run op on sb's agent; the answer comes from on_done. */
static void call(struct http_req *req, struct sandbox *sb, json_t *op, unsigned status)
{
    struct sbx_err err = {0};
    struct session_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->status = status;
    x->is_default = sb->rec.enable_default_session;
    const char *op_name = json_string_value(json_object_get(op, "op"));
    if (!strcmp(op_name, "session_create") || !strcmp(op_name, "session_delete")) {
        x->action = op_name[8] == 'c' ? "session.create" : "session.delete";
        x->store = manager_store(sb->mgr);
        snprintf(x->sandbox_id, sizeof(x->sandbox_id), "%s", sb->rec.id);
        snprintf(x->session_id, sizeof(x->session_id), "%s",
                 json_string_value(json_object_get(op, "id")) ?: "");
    }
    if (agentcall_start(sb, op, &call_ops, x, &x->call, &err) < 0) {
        free(x);
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, on_abort, x);
}

static void api_sessions_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct sandbox *sb;
    if (http_req_json(req, &body, &err) < 0)
        goto fail;
    char gen[SESSION_ID_MAX + 1];
    const char *id = NULL;
    json_t *v = json_object_get(body, "id");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
            !session_id_valid(json_string_value(v))) {
            sbx_err_set(&err, EINVAL, "invalid_session_id",
                        "id must be 1 to %d of A-Z a-z 0-9 _ . -", SESSION_ID_MAX);
            goto fail;
        }
        id = json_string_value(v);
    } else {
        sbx_random_id("sess_", 8, gen, sizeof(gen));
        id = gen;
    }
    json_t *env = json_object_get(body, "env");
    if (json_is_null(env))
        env = NULL;
    if (sandbox_env_validate(env, "env", &err) < 0)
        goto fail;
    const char *cwd = NULL;
    v = json_object_get(body, "cwd");
    if (v && !json_is_null(v)) {
        cwd = json_string_value(v);
        if (!cwd || cwd[0] != '/' || json_string_length(v) > EXEC_CWD_MAX ||
            strlen(cwd) != json_string_length(v)) {
            sbx_err_set(&err, EINVAL, "invalid_cwd", "cwd must be an absolute path");
            goto fail;
        }
    }
    long long timeout_ms = 0;
    v = json_object_get(body, "command_timeout_ms");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SESSION_TIMEOUT_MS_MAX) {
            sbx_err_set(&err, EINVAL, "invalid_timeout",
                        "command_timeout_ms must be an integer from 1 to %d",
                        SESSION_TIMEOUT_MS_MAX);
            goto fail;
        }
        timeout_ms = json_integer_value(v);
    }
    const char *user;
    if (runas_parse(json_object_get(body, "user"), &user, &err) < 0 ||
        manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        runas_check(sb, user, &err) < 0)
        goto fail;
    json_t *op = json_pack("{s:s,s:s,s:o,s:I}", "op", "session_create", "id", id, "env",
                           session_env_list(sb, env), "timeout_ms", (json_int_t)timeout_ms);
    if (cwd)
        json_object_set_new(op, "cwd", json_string(cwd));
    runas_put(op, user);
    call(req, sb, op, 201);
    json_decref(body);
    return;
fail:
    json_decref(body);
    http_respond_error(req, &err);
}

static void api_sessions_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    json_t *op = json_pack("{s:s}", "op", "session_list");
    /* The default session is there from the start, as far as a caller can tell. */
    if (sb->rec.enable_default_session) {
        json_object_set_new(op, "ensure", json_string(SESSION_DEFAULT_ID));
        json_object_set_new(op, "session_env", session_env_list(sb, NULL));
    }
    call(req, sb, op, 200);
}

static void api_sessions_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    const char *sid = http_req_param(req, 1);
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (!strcmp(sid, SESSION_DEFAULT_ID)) {
        http_respond_errorf(req, "cannot_delete_default_session",
                            "the default session cannot be deleted; destroy the sandbox instead "
                            "(DELETE /v1/sandboxes/%s)",
                            sb->rec.id);
        return;
    }
    if (!session_id_valid(sid)) {
        http_respond_errorf(req, "session_not_found", "no session %.64s", sid);
        return;
    }
    call(req, sb, json_pack("{s:s,s:s}", "op", "session_delete", "id", sid), 200);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/sessions", AUTH_SANDBOX, api_sessions_create, 0},
    {"GET", "/v1/sandboxes/{}/sessions", AUTH_SANDBOX, api_sessions_list, 0},
    {"DELETE", "/v1/sandboxes/{}/sessions/{}", AUTH_SANDBOX, api_sessions_delete, 0},
};

const struct route_table session_routes = ROUTE_TABLE(routes);
