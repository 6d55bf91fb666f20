/* GET /v1/sandboxes/{id}/artifacts and the signed links it hands out,
 * GET /v1/sandboxes/{id}/artifacts/{path}?sha256=&expires=&sig= (no key). */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "artifacts.h"
#include "collect.h"
#include "workspace.h"

/* --- GET /v1/sandboxes/{id}/artifacts ----------------------------------------------------- */

struct list_req {
    struct http_req *req; /* NULL once the client went away */
    struct store *store;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    char sandbox_id[STORE_ID_MAX + 1];
};

static void list_abort(struct http_req *req, void *data)
{
    struct list_req *l = data;
    l->req = NULL;
}

static void list_ready(json_t *artifacts, const struct sbx_err *err, void *data)
{
    struct list_req *l = data;
    audit_record(l->store, &l->who, NULL, l->request_id, "artifact.list", l->sandbox_id,
                 err ? err->code : "ok",
                 err ? NULL : json_pack("{s:I}", "count", (json_int_t)json_array_size(artifacts)));
    if (l->req) {
        if (err)
            http_respond_error(l->req, err);
        else
            http_respond_json(l->req, 200,
                              json_pack("{s:s,s:O}", "object", "list", "data", artifacts));
    }
    json_decref(artifacts);
    free(l);
}

static void api_artifacts_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    struct list_req *l = sbx_xcalloc(1, sizeof(*l));
    l->req = req;
    l->store = d->store;
    l->who = *http_req_identity(req);
    snprintf(l->request_id, sizeof(l->request_id), "%s", http_req_id(req));
    snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", sb->rec.id);
    http_req_suspend(req, list_abort, l);
    files_collect_artifacts(d, sb, list_ready, l);
}

/* --- signed links -------------------------------------------------------------------------- */

static void api_artifacts_download(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *sha = http_req_query(req, "sha256");
    int fd;
    uint64_t size;
    if (artifacts_open_link(d->artifacts, http_req_param(req, 0), http_req_param(req, 1), sha,
                            http_req_query(req, "expires"), http_req_query(req, "sig"),
                            sbx_wall_ms() / 1000, &fd, &size, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const char *path = http_req_param(req, 1);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* RFC 6266 / 5987: the name as percent-encoded UTF-8 (curl leaves only
     * ALPHA / DIGIT / "-._~" as they are, all valid attr-chars). */
    char *enc = curl_easy_escape(NULL, base, 0);
    if (!enc)
        abort();
    _cleanup_free_ char *disp = sbx_xasprintf("attachment; filename*=UTF-8''%s", enc);
    curl_free(enc);
    http_req_add_header(req, "Content-Disposition", disp);
    http_req_add_header(req, "x-sbx-sha256", sha);
    /* Signed links need no key: the entry names the sandbox and the link, not a caller. */
    audit_record(d->store, NULL, "link", http_req_id(req), "artifact.download",
                 http_req_param(req, 0), "ok",
                 json_pack("{s:s,s:s,s:I}", "path", path, "sha256", sha, "size", (json_int_t)size));
    http_respond_fd(req, 200, fd, size, "application/octet-stream");
}

static const struct route routes[] = {
    {"GET", "/v1/sandboxes/{}/artifacts", AUTH_SANDBOX, api_artifacts_list, 0},
    /* Signed links: the signature in the query is the credential. */
    {"GET", "/v1/sandboxes/{}/artifacts/{*}", AUTH_PUBLIC, api_artifacts_download, 0},
};

const struct route_table artifact_routes = ROUTE_TABLE(routes);
