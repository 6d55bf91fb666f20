/* Import circle with e2b_api.c (allowed inside a folder, docs/architecture.md#layering):
 * create and DELETE /templates/{id} call it; it answers through e2b_api.c's key check. */
/* E2B's snapshots (docs/e2b.md) on sbx's workspace snapshots:
 *   POST   /e2b/api/sandboxes/{id}/snapshots  {name?} -> 201 {snapshotID, names}
 *   GET    /e2b/api/snapshots                 ?sandboxID, name, limit, nextToken
 *   DELETE /e2b/api/templates/{id}            for a snapshot's id or name (e2b_api.c)
 *   POST   /e2b/api/sandboxes {templateID: <snapshot id or name>}: a sandbox from it
 * A snapshot is a copy of the sandbox's workspace (/home/user; the root filesystem is the
 * template's, read-only), made by snapshot_workspace_copy as a v1 snapshot or a skill
 * install's is, the sandbox going on running. Unlike a v1 snapshot it outlives its
 * sandbox, as E2B's do: it lives in <data>/e2b-snapshots/<id>/ with snapshot.json (its
 * owner, sandbox, name, templates, time) and belongs to the user of the key that made it.
 * A sandbox made from it starts that workspace with the snapshot's template, cold: memory
 * and processes are not part of it (a paused sandbox keeps them; docs/snapshots.md). */
#include "e2b_snapshots.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "../snapshot/snapshot.h"
#include "e2b.h"
#include "e2b_api.h"

#define SNAP_PREFIX "snapshot_"
#define SNAP_HEX 24
#define SNAP_DIR "e2b-snapshots"
#define SNAP_META "snapshot.json"
#define SNAP_META_MAX (64 * 1024)
#define SNAPS_PER_USER_MAX 20
#define SNAP_NAME_MAX 128
#define SNAP_LIST_MAX 100

bool e2b_snapshot_id(const char *s)
{
    return !strncmp(s, SNAP_PREFIX, strlen(SNAP_PREFIX));
}

static char *snap_root(struct sbxd *d)
{
    return sbx_xasprintf("%s/%s", d->cfg.data_dir, SNAP_DIR);
}

/* Every snapshot's record (its directory's snapshot.json), in id order. */
typedef bool (*snap_cb)(json_t *rec, void *data); /* false: stop */

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void snap_each(struct sbxd *d, snap_cb cb, void *data)
{
    _cleanup_free_ char *root = snap_root(d);
    struct dirent **names = NULL;
    int n = scandir(root, &names, NULL, cmp_names);
    bool go = true;
    for (int i = 0; i < n; i++) {
        if (go && e2b_snapshot_id(names[i]->d_name)) {
            _cleanup_free_ char *path =
                sbx_xasprintf("%s/%s/%s", root, names[i]->d_name, SNAP_META);
            _cleanup_free_ char *text = NULL;
            size_t len;
            json_t *rec = sbx_read_file(path, SNAP_META_MAX, &text, &len) == 0
                              ? json_loadb(text, len, 0, NULL)
                              : NULL;
            if (json_is_object(rec))
                go = cb(rec, data);
            json_decref(rec);
        }
        free(names[i]);
    }
    free(names);
}

struct find {
    const char *user, *want; /* an id or a name */
    json_t *found;
    size_t count;            /* the user's snapshots */
};

static bool find_one(json_t *rec, void *data)
{
    struct find *f = data;
    if (strcmp(json_string_value(json_object_get(rec, "user")) ?: "", f->user))
        return true;
    f->count++;
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    if (!f->found && f->want &&
        ((id && !strcmp(id, f->want)) || (name && !strcmp(name, f->want))))
        f->found = json_incref(rec);
    return true;
}

static json_t *snap_find(struct sbxd *d, const char *user, const char *want, size_t *count)
{
    struct find f = {.user = user, .want = want};
    snap_each(d, find_one, &f);
    if (count)
        *count = f.count;
    return f.found;
}

int e2b_snapshot_source(struct sbxd *d, const char *user, const char *name, char *tmpl,
                        size_t cap, char **from)
{
    json_t *rec = snap_find(d, user, name, NULL);
    if (!rec)
        return 0;
    _cleanup_free_ char *root = snap_root(d);
    snprintf(tmpl, cap, "%s", json_string_value(json_object_get(rec, "template")));
    *from = sbx_xasprintf("%s/%s/%s", root, json_string_value(json_object_get(rec, "id")),
                          json_string_value(json_object_get(rec, "from")));
    json_decref(rec);
    return 1;
}

static json_t *snap_json(json_t *rec)
{
    json_t *name = json_object_get(rec, "name");
    return json_pack("{s:O,s:[O?]}", "snapshotID", json_object_get(rec, "id"), "names",
                     json_is_string(name) ? name : NULL);
}

static int check_name(json_t *name, struct sbx_err *err)
{
    if (!name || json_is_null(name))
        return 0;
    const char *s = json_string_value(name);
    if (!s || !*s || strlen(s) > SNAP_NAME_MAX || e2b_snapshot_id(s))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "name must be 1 to %d characters, not starting with %s", SNAP_NAME_MAX,
                           SNAP_PREFIX);
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("-_.", *c)))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "name may hold letters, digits, '-', '_' and '.' only");
    return 0;
}

static int snap_remove(struct sbxd *d, const char *id, struct sbx_err *err)
{
    _cleanup_free_ char *root = snap_root(d);
    _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", root, id);
    int r = sbx_rm_rf(dir);
    return r < 0 ? sbx_err_sys(err, -r, "removing snapshot %s", id) : 0;
}

static void api_snapshot_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL, *rec = NULL, *old = NULL;
    _cleanup_free_ char *dir = NULL, *from = NULL, *text = NULL, *meta = NULL, *root = NULL;
    char id[sizeof(SNAP_PREFIX) + SNAP_HEX];
    if (e2b_lookup(d, req, &sb) < 0 || e2b_optional_body(req, &body) < 0)
        return;
    const char *user = http_req_identity(req)->user;
    json_t *name = json_object_get(body, "name");
    size_t count = 0;
    if (check_name(name, &err) < 0)
        goto fail;
    old = snap_find(d, user, json_is_string(name) ? json_string_value(name) : NULL, &count);
    if (!old && count >= SNAPS_PER_USER_MAX) {
        sbx_err_set(&err, EAGAIN, "too_many_snapshots", "at most %d snapshots per user",
                    SNAPS_PER_USER_MAX);
        goto fail;
    }
    sbx_random_id(SNAP_PREFIX, SNAP_HEX / 2, id, sizeof(id));
    root = snap_root(d);
    dir = sbx_xasprintf("%s/%s", root, id);
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0) {
        sbx_err_sys(&err, -r, "creating %s", dir);
        goto fail;
    }
    if (snapshot_workspace_copy(d->mgr, sb, dir, &from, &err) < 0) {
        (void)sbx_rm_rf(dir);
        goto fail;
    }
    char e2b_tmpl[STORE_NAME_MAX + 1];
    struct sbx_err merr = {0};
    if (store_meta_get(d->store, sb->rec.id, E2B_META_TEMPLATE, e2b_tmpl, sizeof(e2b_tmpl),
                       &merr) < 0)
        snprintf(e2b_tmpl, sizeof(e2b_tmpl), "%s", sb->rec.template_name);
    rec = json_pack("{s:s,s:s,s:s,s:O?,s:s,s:s,s:s,s:I}", "id", id, "user", user, "sandbox_id",
                    sb->rec.id, "name", json_is_string(name) ? name : NULL, "template",
                    sb->rec.template_name, "e2b_template", e2b_tmpl, "from",
                    strrchr(from, '/') + 1, "created_at", (json_int_t)sbx_wall_ms());
    text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    meta = sbx_xasprintf("%s/%s", dir, SNAP_META);
    if ((r = sbx_write_file_atomic(meta, text, strlen(text), 0600)) < 0) {
        sbx_err_sys(&err, -r, "writing %s", meta);
        (void)sbx_rm_rf(dir);
        goto fail;
    }
    /* A name given again moves to the new snapshot, as E2B gives its template a new build. */
    if (old)
        (void)snap_remove(d, json_string_value(json_object_get(old, "id")), &merr);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.snapshot",
                 sb->rec.id, "ok", json_pack("{s:s,s:s}", "via", "e2b", "snapshot_id", id));
    http_respond_json(req, 201, snap_json(rec));
    json_decref(rec);
    json_decref(old);
    json_decref(body);
    return;
fail:
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.snapshot",
                 sb->rec.id, err.code[0] ? err.code : "internal", json_pack("{s:s}", "via", "e2b"));
    json_decref(rec);
    json_decref(old);
    json_decref(body);
    e2b_fail(req, &err);
}

struct list {
    const char *user, *sandbox, *name, *after;
    long long limit;
    json_t *items;
    bool more;
};

static bool list_one(json_t *rec, void *data)
{
    struct list *l = data;
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    if (strcmp(json_string_value(json_object_get(rec, "user")) ?: "", l->user) ||
        (l->after && strcmp(id, l->after) <= 0) ||
        (l->sandbox &&
         strcmp(json_string_value(json_object_get(rec, "sandbox_id")) ?: "", l->sandbox)) ||
        (l->name && (!name || strcmp(name, l->name))))
        return true;
    if ((long long)json_array_size(l->items) == l->limit) {
        l->more = true;
        return false;
    }
    json_array_append_new(l->items, snap_json(rec));
    return true;
}

static void api_snapshot_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    struct list l = {.user = http_req_identity(req)->user, .limit = SNAP_LIST_MAX};
    if (http_req_query_int(req, "limit", 1, SNAP_LIST_MAX, "invalid_request", &l.limit, &err) <
        0) {
        e2b_fail(req, &err);
        return;
    }
    l.sandbox = http_req_query(req, "sandboxID");
    l.name = http_req_query(req, "name");
    l.after = http_req_query(req, "nextToken");
    l.items = json_array();
    snap_each(d, list_one, &l);
    if (l.more) {
        json_t *last = json_array_get(l.items, json_array_size(l.items) - 1);
        http_req_add_header(req, "X-Next-Token",
                            json_string_value(json_object_get(last, "snapshotID")));
    }
    http_respond_json(req, 200, l.items);
}

bool e2b_snapshot_delete(struct sbxd *d, struct http_req *req)
{
    const char *want = http_req_param(req, 0);
    const char *user = http_req_identity(req)->user;
    json_t *rec = snap_find(d, user, want, NULL);
    if (!rec && !e2b_snapshot_id(want))
        return false;
    struct sbx_err err = {0};
    const char *id = json_string_value(json_object_get(rec, "id"));
    int r = rec ? snap_remove(d, id, &err)
                : sbx_err_set(&err, ENOENT, "snapshot_not_found", "snapshot %.64s not found", want);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "snapshot.delete",
                 rec ? json_string_value(json_object_get(rec, "sandbox_id")) : NULL,
                 r < 0 ? err.code : "ok", json_pack("{s:s,s:s}", "via", "e2b", "snapshot_id", want));
    json_decref(rec);
    if (r < 0)
        e2b_fail(req, &err);
    else
        http_respond_text(req, 204, "");
    return true;
}

static const struct route routes[] = {
    {"POST", "/e2b/api/sandboxes/{}/snapshots", AUTH_PUBLIC, api_snapshot_create, 0},
    {"GET", "/e2b/api/snapshots", AUTH_PUBLIC, api_snapshot_list, 0},
};

const struct route_table e2b_snapshot_routes = ROUTE_TABLE(routes);
