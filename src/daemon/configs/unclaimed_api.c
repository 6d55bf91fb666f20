/* DELETE /v1/sandbox-configs/{id}/unclaimed (admin): remove the containers of a docker
 * configuration that sbx forgot (docs/runtime.md "Docker", the inventory's `unclaimed`):
 * those the engine lists with the configuration's label whose sbx.id names no sandbox in
 * the store (on any node) but a destroyed one, and that this daemon does not hold. Their
 * volumes go with them on a remote engine (the workspace of a forgotten sandbox). The
 * engine is asked and answers on worker threads; the removal is audited with what it
 * removed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../../runtime/docker_api.h"
#include "../../runtime/docker_image.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "configs.h"

/* The most containers one request removes: the rest wait for the next. */
#define UNCLAIMED_REMOVE_MAX 64

struct removal {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client has gone: the removal still completes */
    struct auth_identity who;
    char req_id[64];
    char id[STORE_ID_MAX + 1];
    char *host, *tls_dir;
    long timeout_ms;
    json_t *todo;    /* [{id, container, engine_id}] */
    json_t *removed; /* [{id, container}] */
    json_t *failed;  /* [{id, container, error}] */
};

static void removal_free(struct removal *x)
{
    free(x->host);
    free(x->tls_dir);
    json_decref(x->todo);
    json_decref(x->removed);
    json_decref(x->failed);
    free(x);
}

static void removal_abort(struct http_req *req, void *data)
{
    struct removal *x = data;
    x->req = NULL;
}

/* Does the store or this daemon still own sandbox sid? */
static bool claimed(struct sbxd *d, const char *sid)
{
    if (manager_has(d->mgr, sid))
        return true;
    struct store_sandbox row;
    struct sbx_err err = {0};
    if (store_sandbox_get(d->store, sid, &row, &err) < 0)
        return strcmp(err.code, "sandbox_not_found") != 0; /* unsure: keep it */
    bool live = strcmp(row.status, SANDBOX_DESTROYED) != 0;
    store_sandbox_clear(&row);
    return live;
}

static void remove_run(void *data)
{
    struct removal *x = data;
    struct docker_engine e = {.host = x->host, .tls_dir = x->tls_dir};
    bool remote = docker_host_remote(x->host);
    size_t i;
    json_t *c;
    json_array_foreach(x->todo, i, c)
    {
        const char *sid = json_string_value(json_object_get(c, "id"));
        _cleanup_free_ char *vol = remote ? sbx_xasprintf(DOCKER_NAME_PREFIX "%s", sid) : NULL;
        struct sbx_err err = {0};
        json_t *row = json_pack("{s:O,s:O}", "id", json_object_get(c, "id"), "container",
                                json_object_get(c, "container"));
        if (docker_engine_remove(&e, x->timeout_ms,
                                 json_string_value(json_object_get(c, "engine_id")), vol,
                                 &err) < 0) {
            json_object_set_new(row, "error", json_string(err.msg));
            json_array_append_new(x->failed, row);
        } else {
            json_array_append_new(x->removed, row);
        }
    }
}

static void remove_done(void *data, bool ran)
{
    struct removal *x = data;
    if (!ran)
        json_array_extend(x->failed, x->todo);
    audit_record(x->d->store, &x->who, NULL, x->req_id, "sandbox_config.unclaimed_remove", NULL,
                 json_array_size(x->failed) ? "partial" : "ok",
                 json_pack("{s:s,s:O,s:O}", "config_id", x->id, "removed", x->removed, "failed",
                           x->failed));
    if (x->req)
        http_respond_json(x->req, 200,
                          json_pack("{s:s,s:s,s:O,s:O}", "object", "unclaimed_removal",
                                    "config_id", x->id, "removed", x->removed, "failed",
                                    x->failed));
    removal_free(x);
}

/* A refusal: audited too (who tried, on what), then answered. */
static void refuse(struct sbxd *d, struct http_req *req, const char *id, const struct sbx_err *err)
{
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 "sandbox_config.unclaimed_remove", NULL, err->code,
                 json_pack("{s:s}", "config_id", id));
    http_respond_error(req, err);
}

static void listed(void *data, const struct configs_engine_answer *a)
{
    struct removal *x = data;
    struct sbx_err err = {0};
    if (!x->req) {
        removal_free(x);
        return;
    }
    if (!a->asked || !a->list) {
        if (!a->asked)
            sbx_err_set(&err, EINVAL, "invalid_request",
                        "configuration %s is not a docker configuration", x->id);
        else
            sbx_err_set(&err, EIO, a->code, "%s", a->why);
        refuse(x->d, x->req, x->id, &err);
        removal_free(x);
        return;
    }
    size_t i;
    json_t *ct;
    json_array_foreach(a->list, i, ct)
    {
        json_t *labels = json_object_get(ct, "Labels");
        const char *sid = json_string_value(json_object_get(labels, DOCKER_LABEL_ID));
        const char *cfg = json_string_value(json_object_get(labels, DOCKER_LABEL_CONFIG));
        const char *eid = json_string_value(json_object_get(ct, "Id"));
        /* sbx's labels, this configuration's, and a sandbox id nobody holds. */
        if (!sid || !eid || !cfg || strcmp(cfg, x->id) || strlen(sid) > RT_ID_MAX ||
            claimed(x->d, sid) || json_array_size(x->todo) >= UNCLAIMED_REMOVE_MAX)
            continue;
        json_array_append_new(x->todo,
                              json_pack("{s:s,s:O?,s:s}", "id", sid, "container",
                                        json_array_get(json_object_get(ct, "Names"), 0),
                                        "engine_id", eid));
    }
    x->host = sbx_xstrdup(a->host);
    x->tls_dir = a->tls_dir ? sbx_xstrdup(a->tls_dir) : NULL;
    x->timeout_ms = a->timeout_ms;
    jobs_submit(x->d->jobs, remove_run, remove_done, x);
}

static void api_unclaimed_remove(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *id = http_req_param(req, 0);
    struct config_loaded l;
    if (configs_load(d->configs, id, &l, &err) < 0) {
        refuse(d, req, id, &err);
        return;
    }
    config_loaded_clear(&l);
    struct removal *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->req_id, sizeof(x->req_id), "%s", http_req_id(req));
    snprintf(x->id, sizeof(x->id), "%s", id);
    x->todo = json_array();
    x->removed = json_array();
    x->failed = json_array();
    if (configs_engine_ask(d->configs, d->jobs, x->id, listed, x))
        http_req_suspend(req, removal_abort, x);
}

static const struct route routes[] = {
    {"DELETE", "/v1/sandbox-configs/{}/unclaimed", AUTH_ADMIN_FULL, api_unclaimed_remove, 0},
};

const struct route_table unclaimed_routes = ROUTE_TABLE(routes);
