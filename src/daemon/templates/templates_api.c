/* GET /v1/templates[/{name}]: the templates this host has built (the names in the template
 * cache that point at a finished build) that the caller may use (the operator's, its own
 * custom ones and the shared ones), what each contains, its size and its warm pool. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "listing.h"
#include "pool.h"

#define TEMPLATES_LIST_MAX 256 /* names read from the cache dir */

static json_t *strings_or_empty(json_t *manifest, const char *key)
{
    json_t *v = json_object_get(manifest, key);
    return json_is_array(v) ? json_incref(v) : json_array();
}

static json_t *template_json(struct sbxd *d, const char *name, json_t *m)
{
    const char *digest = json_string_value(json_object_get(m, "content_digest"));
    json_t *node = json_object_get(m, "node");
    json_t *bytes = json_object_get(m, "bytes");
    json_t *installed = json_object_get(m, "installed");
    struct pool_state ps;
    warm_pool_state(d->pool, name, &ps);
    return json_pack(
        "{s:s,s:s,s:s+,s:O?,s:O?,s:O?,s:{s:O?,s:o,s:o,s:I},s:b,s:I,s:{s:I,s:I,s:I,s:I,s:b}}",
        "object", "template", "name", name, "digest",
        strncmp(digest, "sha256:", 7) ? "sha256:" : "", digest, "recipe_digest",
        json_object_get(m, "recipe_digest"), "created_at", json_object_get(m, "created_at"),
        "size_bytes", json_is_integer(bytes) ? bytes : NULL, "contains", "node",
        json_is_string(node) ? node : NULL, "packages", strings_or_empty(m, "packages"), "npm",
        strings_or_empty(m, "npm"), "installed_packages",
        (json_int_t)(json_is_array(installed) ? json_array_size(installed) : 0), "warm",
        ps.size > 0, "pool_size", (json_int_t)ps.size, "pool", "size", (json_int_t)ps.size, "ready",
        (json_int_t)ps.ready, "starting", (json_int_t)ps.starting, "taken", (json_int_t)ps.taken,
        "yielding", ps.yielding);
}

/* The manifest's "from" (a derived template's parent) is optional: set it after packing,
 * since json_pack cannot skip a key whose value is absent. */
static json_t *describe(struct sbxd *d, const char *name, json_t *m)
{
    json_t *j = template_json(d, name, m);
    json_t *from = json_object_get(m, "from");
    if (j && json_is_string(from))
        json_object_set(j, "from", from);
    /* A custom template's (POST /v1/templates): who made it, for whom, from what recipe. */
    json_t *owner = json_object_get(m, "owner");
    if (j && json_is_string(owner)) {
        json_object_set(j, "owner", owner);
        json_object_set_new(j, "public", json_boolean(json_is_true(json_object_get(m, "shared"))));
        json_object_set_new(j, "custom", json_true());
        json_t *recipe = json_object_get(m, "recipe");
        if (recipe)
            json_object_set(j, "recipe", recipe);
        json_t *pb = json_object_get(m, "parent_bytes"), *b = json_object_get(m, "bytes");
        if (json_is_integer(pb) && json_is_integer(b))
            json_object_set_new(j, "added_bytes",
                                json_integer(json_integer_value(b) - json_integer_value(pb)));
    } else if (j) {
        json_object_set_new(j, "custom", json_false());
    }
    const char *snap = warm_pool_snapshot_state(d->pool, name);
    if (j) {
        json_object_set_new(j, "warm_snapshot", json_string(snap));
        if (!strcmp(snap, "ready"))
            json_object_set_new(j, "warm", json_true());
    }
    return j;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

json_t *templates_list(struct sbxd *d, const char *user)
{
    json_t *list = json_array();
    DIR *dir = opendir(d->cfg.template_cache);
    char *names[TEMPLATES_LIST_MAX];
    size_t n = 0;
    for (struct dirent *de; dir && n < TEMPLATES_LIST_MAX && (de = readdir(dir));) {
        /* A template is a name that links to its newest build (docs/templates.md). */
        if (de->d_type == DT_LNK && template_name_valid(de->d_name))
            names[n++] = sbx_xstrdup(de->d_name);
    }
    if (dir)
        closedir(dir);
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        json_t *m;
        struct sbx_err err = {0};
        if (template_load(d->cfg.template_cache, names[i], &m, NULL, &err) == 0) {
            json_t *t = template_visible(m, user) ? describe(d, names[i], m) : NULL;
            if (t)
                json_array_append_new(list, t);
            json_decref(m);
        }
        free(names[i]);
    }
    return list;
}

static void api_templates_list(struct sbxd *d, struct http_req *req)
{
    http_respond_json(req, 200,
                      json_pack("{s:s,s:o}", "object", "list", "data",
                                templates_list(d, http_req_identity(req)->user)));
}

static void api_templates_get(struct sbxd *d, struct http_req *req)
{
    const char *name = http_req_param(req, 0);
    json_t *m;
    struct sbx_err err = {0};
    bool found = template_name_valid(name) &&
                 template_load(d->cfg.template_cache, name, &m, NULL, &err) == 0;
    if (found && !template_visible(m, http_req_identity(req)->user)) {
        json_decref(m);
        found = false; /* another user's private template */
    }
    if (!found) {
        sbx_err_set(&err, ENOENT, "template_not_found", "no template named %.64s on this host",
                    name);
        http_respond_error(req, &err);
        return;
    }
    json_t *t = describe(d, name, m);
    json_decref(m);
    if (!t) {
        sbx_err_set(&err, EIO, "internal", "template %s: unreadable manifest", name);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, t);
}

static const struct route routes[] = {
    {"GET", "/v1/templates", AUTH_SANDBOX, api_templates_list, 0},
    {"GET", "/v1/templates/{}", AUTH_SANDBOX, api_templates_get, 0},
};

const struct route_table template_routes = ROUTE_TABLE(routes);
