/* The skill catalog (docs/skills.md):
 *   POST   /v1/skills/catalog                     a bundle (application/zip, a tar, or
 *                                                 multipart/form-data file=) or
 *                                                 {"source": "@owner/slug"} (admin)
 *   GET    /v1/skills/catalog                     every entry with its installations
 *   GET    /v1/skills/catalog/{id}
 *   GET    /v1/skills/catalog/{id}/files          [{path, size, sha256}]
 *   GET    /v1/skills/catalog/{id}/files/content?path=
 *   DELETE /v1/skills/catalog/{id}                (admin)
 *   POST   /v1/sandbox-configs/{id}/skills        a bundle or a source, installed (admin) */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "bundle.h"
#include "catalog.h"
#include "installs.h"

#define SKILL_JSON_MAX (64u * 1024u)
#define SKILL_FORM_FIELD "file"

struct upload {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    bool json;
    struct http_form *form; /* multipart/form-data: the bundle is its "file" field */
    bool got_file;
    int fd;           /* the bundle, for a zip body */
    char *buf;        /* the body, for a JSON one */
    size_t len, size; /* bytes of either */
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    char config_id[STORE_ID_MAX + 1]; /* install it there once taken, or "" */
};

static void upload_free(struct upload *u)
{
    if (u->fd >= 0)
        close(u->fd);
    http_form_free(u->form);
    free(u->buf);
    free(u);
}

static int form_value(void *data, const char *field, const char *filename, uint64_t off,
                      const char *buf, size_t len)
{
    struct upload *u = data;
    if (!field || strcmp(field, SKILL_FORM_FIELD))
        return 0; /* other fields say nothing about the bundle */
    if (off == 0 && u->got_file && len)
        return -EEXIST;
    u->got_file = true;
    if (off + len > BUNDLE_UPLOAD_MAX)
        return -EFBIG;
    return sbx_write_all(u->fd, buf, len);
}

static int form_error(int r, struct sbx_err *err)
{
    if (r == -EFBIG)
        return sbx_err_set(err, EFBIG, "bundle_too_large", "bundles are limited to %u bytes",
                           BUNDLE_UPLOAD_MAX);
    if (r == -EEXIST)
        return sbx_err_set(err, EINVAL, "invalid_request", "send one file field");
    if (r == -EINVAL)
        return sbx_err_set(err, EINVAL, "invalid_request", "the multipart body is malformed");
    return sbx_err_sys(err, -r, "storing the bundle");
}

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    u->size += len;
    if (u->json) {
        if (u->size > SKILL_JSON_MAX)
            return sbx_err_set(err, EFBIG, "body_too_large", "a JSON body of at most %u bytes",
                               SKILL_JSON_MAX);
        u->buf = sbx_xrealloc(u->buf, u->len + len + 1);
        memcpy(u->buf + u->len, buf, len);
        u->len += len;
        u->buf[u->len] = '\0';
        return 0;
    }
    if (u->size > BUNDLE_UPLOAD_MAX + (u->form ? HTTP_FORM_BUFFER : 0))
        return sbx_err_set(err, EFBIG, "bundle_too_large", "bundles are limited to %u bytes",
                           BUNDLE_UPLOAD_MAX);
    if (u->form) {
        int r = http_form_feed(u->form, buf, len);
        return r < 0 ? form_error(r, err) : 0;
    }
    int r = sbx_write_all(u->fd, buf, len);
    return r < 0 ? sbx_err_sys(err, -r, "storing the bundle") : 0;
}

static void on_added(json_t *item, const struct sbx_err *err, void *data)
{
    struct upload *u = data;
    struct sbx_err ierr = {0};
    audit_record(u->d->store, &u->who, NULL, u->request_id, "skill.add",
                 item ? json_string_value(json_object_get(item, "id")) : NULL,
                 err ? err->code : "ok",
                 item ? json_pack("{s:O,s:O,s:O}", "name", json_object_get(item, "name"), "version",
                                  json_object_get(item, "version"), "bundle_sha256",
                                  json_object_get(item, "bundle_sha256"))
                      : NULL);
    char skill_id[STORE_ID_MAX + 1] = "";
    if (!err && u->config_id[0]) {
        /* Installed whether or not the client still waits for the answer. */
        const char *cat = json_string_value(json_object_get(item, "id"));
        int r = installs_start(u->d->installs, &u->who, u->config_id, cat, skill_id, &ierr);
        audit_record(u->d->store, &u->who, NULL, u->request_id, "skill.install", skill_id,
                     r < 0 ? ierr.code : "ok",
                     json_pack("{s:s,s:s}", "sandbox_config_id", u->config_id, "catalog_id", cat));
        if (r < 0)
            err = &ierr;
    }
    if (u->req) {
        if (err)
            http_respond_error(u->req, err);
        else if (u->config_id[0])
            http_respond_json(u->req, 202,
                              json_pack("{s:s,s:s,s:O}", "skill_id", skill_id, "sandbox_config_id",
                                        u->config_id, "catalog_id", json_object_get(item, "id")));
        else
            http_respond_json(u->req, 201, json_incref(item));
    }
    json_decref(item);
    upload_free(u);
}

static void upload_abort(struct http_req *req, void *data)
{
    struct upload *u = data;
    u->req = NULL; /* the bundle is still taken or refused; nobody hears of it */
}

static void upload_end(struct http_req *req, void *data)
{
    struct upload *u = data;
    struct sbx_err err = {0};
    bool reuse = u->config_id[0] != '\0';
    if (!u->json) {
        int r = u->form ? http_form_finish(u->form) : 0;
        if (r < 0)
            form_error(r, &err);
        else if (u->form && !u->got_file)
            sbx_err_set(&err, EINVAL, "invalid_request",
                        "the multipart body has no \"" SKILL_FORM_FIELD "\" field");
        if (err.code[0]) {
            http_respond_error(req, &err);
            upload_free(u);
            return;
        }
        http_req_suspend(req, upload_abort, u);
        int fd = TAKE_FD(u->fd);
        skills_add_bundle(u->d->skills, fd, "upload", u->who.user, reuse, on_added, u);
        return;
    }
    json_error_t jerr;
    json_t *body = json_loads(u->buf ? u->buf : "", JSON_REJECT_DUPLICATES, &jerr);
    json_t *src = json_object_get(body, "source");
    int r;
    if (!json_is_object(body))
        r = sbx_err_set(&err, EINVAL, "invalid_json", "the body is not a JSON object");
    else if (json_object_size(body) != 1 || !json_is_string(src))
        r = sbx_err_set(&err, EINVAL, "invalid_request",
                        "send {\"source\": \"@owner/slug\"}, or the bundle as application/zip");
    else
        r = skills_add_source(u->d->skills, json_string_value(src), u->who.user, reuse, on_added, u,
                              &err);
    json_decref(body);
    if (r < 0) {
        http_respond_error(req, &err);
        upload_free(u);
        return;
    }
    /* The fetch runs on a worker: its answer comes from on_added, never before this. */
    http_req_suspend(req, upload_abort, u);
}

static void upload_failed(struct http_req *req, void *data)
{
    upload_free(data);
}

static const struct http_body_sink upload_sink = {
    .on_data = upload_data,
    .on_end = upload_end,
    .on_failed = upload_failed,
};

static void upload_start(struct sbxd *d, struct http_req *req, const char *config_id)
{
    const char *ct = http_req_header(req, "Content-Type");
    size_t n = ct ? strcspn(ct, "; ") : 0;
    bool json = ct && n == 16 && !strncasecmp(ct, "application/json", n);
    bool form = ct && n == 19 && !strncasecmp(ct, "multipart/form-data", n);
    bool bundle = ct && ((n == 15 && !strncasecmp(ct, "application/zip", n)) ||
                         (n == 24 && !strncasecmp(ct, "application/octet-stream", n)) ||
                         (n == 17 && !strncasecmp(ct, "application/x-tar", n)) ||
                         (n == 16 && !strncasecmp(ct, "application/gzip", n)));
    if (!json && !bundle && !form) {
        http_respond_errorf(req, "unsupported_media_type",
                            "send the bundle as application/zip or multipart/form-data "
                            "(file=), or {\"source\": \"@owner/slug\"} as application/json");
        return;
    }
    uint64_t len;
    if (http_req_content_length(req, &len) &&
        len > BUNDLE_UPLOAD_MAX + (form ? HTTP_FORM_BUFFER : 0)) {
        http_respond_errorf(req, "bundle_too_large", "bundles are limited to %u bytes",
                            BUNDLE_UPLOAD_MAX);
        return;
    }
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->d = d;
    u->req = req;
    u->json = json;
    u->fd = -1;
    u->who = *http_req_identity(req);
    snprintf(u->request_id, sizeof(u->request_id), "%s", http_req_id(req));
    snprintf(u->config_id, sizeof(u->config_id), "%s", config_id ? config_id : "");
    struct sbx_err err = {0};
    if (!json) {
        _cleanup_free_ char *dir = sbx_xasprintf("%s/skills", d->cfg.data_dir);
        u->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (u->fd < 0)
            sbx_err_sys(&err, errno, "a temporary file for the bundle");
        else if (form && !(u->form = http_form_new(req, form_value, u)))
            sbx_err_set(&err, EINVAL, "invalid_request", "unreadable multipart Content-Type");
    }
    if (err.code[0]) {
        upload_free(u);
        http_respond_error(req, &err);
        return;
    }
    http_req_stream_body(req, &upload_sink, u, upload_abort);
}

static void api_catalog_add(struct sbxd *d, struct http_req *req)
{
    upload_start(d, req, NULL);
}

static void api_config_skill_add(struct sbxd *d, struct http_req *req)
{
    struct store_config c = {0};
    struct sbx_err err = {0};
    int r = store_config_get(d->store, http_req_param(req, 0), &c, &err);
    store_config_clear(&c);
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    upload_start(d, req, http_req_param(req, 0));
}

static void answer(struct http_req *req, int r, json_t *j, const struct sbx_err *err)
{
    if (r < 0)
        http_respond_error(req, err);
    else
        http_respond_json(req, 200, j);
}

static void api_catalog_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *list = NULL;
    int r = skills_list(d->skills, &list, &err);
    answer(req, r, r < 0 ? NULL : json_pack("{s:s,s:o}", "object", "list", "data", list), &err);
}

static void api_catalog_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    int r = skills_get(d->skills, http_req_param(req, 0), &j, &err);
    answer(req, r, j, &err);
}

static void api_catalog_files(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *list = NULL;
    int r = skills_files(d->skills, http_req_param(req, 0), &list, &err);
    answer(req, r, r < 0 ? NULL : json_pack("{s:s,s:o}", "object", "list", "data", list), &err);
}

static void api_catalog_file_content(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    const char *path = http_req_query(req, "path");
    int r = path ? skills_file_content(d->skills, http_req_param(req, 0), path, &j, &err)
                 : sbx_err_set(&err, EINVAL, "invalid_path", "give ?path= (e.g. SKILL.md)");
    answer(req, r, j, &err);
}

static void api_catalog_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *id = http_req_param(req, 0);
    int r = skills_delete(d->skills, id, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "skill.delete", id,
                 r < 0 ? err.code : "ok", NULL);
    answer(req, r,
           r < 0 ? NULL : json_pack("{s:s,s:s,s:b}", "object", "skill", "id", id, "deleted", 1),
           &err);
}

static const struct route routes[] = {
    {"POST", "/v1/skills/catalog", AUTH_ADMIN_FULL, api_catalog_add, ROUTE_STREAM_BODY},
    {"GET", "/v1/skills/catalog", AUTH_KEY, api_catalog_list, 0},
    {"GET", "/v1/skills/catalog/{}", AUTH_KEY, api_catalog_get, 0},
    {"GET", "/v1/skills/catalog/{}/files", AUTH_ADMIN, api_catalog_files, 0},
    {"GET", "/v1/skills/catalog/{}/files/content", AUTH_ADMIN, api_catalog_file_content, 0},
    {"DELETE", "/v1/skills/catalog/{}", AUTH_ADMIN_FULL, api_catalog_delete, 0},
    {"POST", "/v1/sandbox-configs/{}/skills", AUTH_ADMIN_FULL, api_config_skill_add,
     ROUTE_STREAM_BODY},
};

const struct route_table skill_routes = ROUTE_TABLE(routes);
