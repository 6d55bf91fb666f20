/* POST /v1/templates/{name}/docker-image (admin): a built template into a Docker Engine
 * as the image "sbx-<name>" (docs/runtime.md "Docker"), so sandboxes of that template run
 * the same userland there: the docker backend's local engine, or with {"config_id"} the
 * engine a docker configuration names (a remote one over TLS too). The transfer (the
 * whole tree as a tar) runs on a worker thread; the request waits for it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../../runtime/docker_image.h"
#include "../audit/audit.h"
#include "../configs/configs.h"
#include "../store/store.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/template.h"
#include "../sbxd.h"

struct export {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client has gone */
    struct template_info tpl;
    char *host, *tls_dir, *config_id, *image, *id; /* config_id NULL: the local engine */
    struct sbx_err err;
    int r;
};

static void export_run(void *data)
{
    struct export *x = data;
    struct docker_engine e = {.host = x->host, .tls_dir = x->tls_dir};
    x->r = docker_image_import(&e, x->tpl.rootfs, x->image, &x->id, &x->err);
}

static void export_done(void *data, bool ran)
{
    struct export *x = data;
    if (!ran && x->r == 0)
        x->r = sbx_err_set(&x->err, ECANCELED, "internal", "sbxd is stopping");
    if (x->req) {
        audit_record(x->d->store, http_req_identity(x->req), NULL, http_req_id(x->req),
                     "template.docker_export", NULL, x->r < 0 ? x->err.code : "ok",
                     json_pack("{s:s,s:s,s:s,s:s*}", "name", x->tpl.name, "image", x->image,
                               "engine", x->host, "config_id", x->config_id));
        if (x->r < 0)
            http_respond_error(x->req, &x->err);
        else
            http_respond_json(x->req, 200,
                              json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s*}", "object",
                                        "docker_image", "template", x->tpl.name, "digest",
                                        x->tpl.digest, "image", x->image, "id", x->id, "engine",
                                        x->host, "config_id", x->config_id));
    }
    template_info_clear(&x->tpl);
    free(x->host);
    free(x->tls_dir);
    free(x->config_id);
    free(x->image);
    free(x->id);
    free(x);
}

static void export_abort(struct http_req *req, void *data)
{
    struct export *x = data;
    x->req = NULL; /* the import still finishes: the engine keeps what it got */
}

/* The engine the request names: its body's config_id (a docker configuration's), or
 * none (an empty body): the local engine. */
static int export_engine(struct sbxd *d, struct http_req *req, struct export *x)
{
    size_t len = 0;
    if (!http_req_body(req, &len) || len == 0) {
        x->host = sbx_xstrdup(d->cfg.docker_host);
        return 0;
    }
    json_t *body = NULL;
    int r = http_req_json(req, &body, &x->err);
    if (r < 0)
        return r;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "config_id")) {
            r = sbx_err_set(&x->err, EINVAL, "invalid_request", "unknown field %.32s", k);
            break;
        }
    }
    const char *cfg = json_string_value(json_object_get(body, "config_id"));
    if (r == 0 && (!cfg || !*cfg || strlen(cfg) > STORE_ID_MAX))
        r = sbx_err_set(&x->err, EINVAL, "invalid_request",
                        "config_id: a docker configuration's id");
    if (r == 0) {
        x->config_id = sbx_xstrdup(cfg);
        long timeout_ms;
        r = configs_docker_engine(d->configs, cfg, &x->host, &x->tls_dir, &timeout_ms, &x->err);
    }
    json_decref(body);
    return r;
}

static void api_template_docker_export(struct sbxd *d, struct http_req *req)
{
    const char *name = http_req_param(req, 0);
    struct export *x = sbx_xcalloc(1, sizeof(*x));
    int r = template_name_valid(name)
                ? template_resolve(d->cfg.template_cache, name, &x->tpl, &x->err)
                : sbx_err_set(&x->err, ENOENT, "template_not_found", "no template named %.64s",
                              name);
    if (r < 0 && !strcmp(x->err.code, "invalid_template"))
        sbx_err_set(&x->err, ENOENT, "template_not_found", "no template named %.64s on this host",
                    name);
    if (r == 0)
        r = export_engine(d, req, x);
    if (r < 0) {
        audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                     "template.docker_export", NULL, x->err.code,
                     json_pack("{s:s,s:s*}", "name", name, "config_id", x->config_id));
        http_respond_error(req, &x->err);
        template_info_clear(&x->tpl);
        free(x->host);
        free(x->tls_dir);
        free(x->config_id);
        free(x);
        return;
    }
    x->d = d;
    x->req = req;
    x->image = sbx_xasprintf(DOCKER_IMAGE_PREFIX "%s", name);
    http_req_suspend(req, export_abort, x);
    jobs_submit(d->jobs, export_run, export_done, x);
}

static const struct route routes[] = {
    {"POST", "/v1/templates/{}/docker-image", AUTH_ADMIN, api_template_docker_export, 0},
};

const struct route_table template_docker_routes = ROUTE_TABLE(routes);
