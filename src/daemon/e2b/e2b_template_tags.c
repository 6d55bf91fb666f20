/* Import circle with e2b_templates.c (allowed inside a folder,
 * docs/architecture.md#layering): Template.exists asks it whether a name is being built,
 * and it records its finished builds' tags here. */
/* E2B's names, aliases and tags of templates, on sbx's template cache (docs/e2b.md
 * "Templates"):
 *   GET    /e2b/api/templates/aliases/{alias}   Template.exists
 *   POST   /e2b/api/templates/tags              Template.assignTags
 *   DELETE /e2b/api/templates/tags              Template.removeTags
 *   GET    /e2b/api/templates/{id}/tags         Template.getTags
 *   GET    /e2b/api/templates/{id}              the template and its builds
 *   DELETE /e2b/api/templates/{id}              a custom template (template_delete)
 * A template's E2B builds and tags are kept beside the template cache, in
 * <cache>/.e2b-tags/<name>.json: {"builds": [{buildID, digest, createdAt}], newest first,
 * "tags": {tag: {buildID, createdAt}}}. sbx serves the newest build of a template only, so
 * a tag is a label of a build, and Sandbox.create("name:tag") works while the tag names
 * the newest one. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/template.h"
#include "../sbxd.h"
#include "../templates/build.h"
#include "../templates/listing.h"
#include "e2b.h"
#include "e2b_snapshots.h"
#include "e2b_templates.h"

#define E2B_BUILDS_KEPT 16 /* builds a template's record remembers */

const char *e2b_template_base(const char *t)
{
    static const char *const base[] = {"base", "code-interpreter-v1", "code-interpreter"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(base); i++)
        if (!strcmp(t, base[i]))
            return "base";
    return t;
}

static bool uuid_like(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++)
        if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

static int check_tag(const char *t, struct sbx_err *err)
{
    size_t n = strlen(t);
    if (!n || n > E2B_TAG_MAX || strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != n)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "Invalid tag '%.80s': tags are 1..%d of [a-z0-9-_.]", t, E2B_TAG_MAX);
    if (uuid_like(t))
        return sbx_err_set(err, EINVAL, "invalid_request", "Invalid tag '%s': tag cannot be a UUID",
                           t);
    return 0;
}

static void add_tag(json_t *tags, const char *t)
{
    size_t i;
    json_t *v;
    json_array_foreach(tags, i, v) if (!strcmp(json_string_value(v), t)) return;
    json_array_append_new(tags, json_string(t));
}

int e2b_parse_name(const char *in, char name[], json_t *tags, struct sbx_err *err)
{
    char s[TEMPLATE_NAME_MAX + E2B_TAG_MAX + 8];
    while (isspace((unsigned char)*in))
        in++;
    size_t n = strlen(in);
    while (n && isspace((unsigned char)in[n - 1]))
        n--;
    if (n >= sizeof(s))
        return sbx_err_set(err, EINVAL, "invalid_request", "Invalid name: it is too long");
    for (size_t i = 0; i < n; i++)
        s[i] = (char)tolower((unsigned char)in[i]);
    s[n] = '\0';
    char *colon = strchr(s, ':');
    if (colon)
        *colon = '\0';
    if (strchr(s, '/'))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "Invalid name '%.64s': sbx has no template namespaces", s);
    if (!template_name_valid(s))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "Invalid name '%.64s': sbx template names are 1..%d of [a-z0-9-], not "
                           "starting with '-'",
                           s, TEMPLATE_NAME_MAX);
    memcpy(name, s, strlen(s) + 1); /* a valid name fits */
    if (!colon)
        return 0;
    if (check_tag(colon + 1, err) < 0)
        return -EINVAL;
    if (tags && strcmp(colon + 1, E2B_DEFAULT_TAG))
        add_tag(tags, colon + 1);
    return 0;
}

int e2b_parse_tags(json_t *in, json_t *out, struct sbx_err *err)
{
    size_t i;
    json_t *v;
    if (!in || json_is_null(in))
        return 0;
    if (!json_is_array(in) || json_array_size(in) > E2B_TAGS_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "tags must be a list of at most %d",
                           E2B_TAGS_MAX);
    json_array_foreach(in, i, v)
    {
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "a tag must be a string");
        char t[E2B_TAG_MAX + 2];
        snprintf(t, sizeof(t), "%s", json_string_value(v));
        for (char *c = t; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        if (check_tag(t, err) < 0)
            return -EINVAL;
        add_tag(out, t);
    }
    return 0;
}

/* --- a template's record ----------------------------------------------------------------- */

static char *record_path(const struct sbxd *d, const char *name)
{
    return sbx_xasprintf("%s/.e2b-tags/%s.json", d->cfg.template_cache, name);
}

static json_t *record_load(const struct sbxd *d, const char *name)
{
    _cleanup_free_ char *path = record_path(d, name), *text = NULL;
    json_t *o = NULL;
    if (sbx_read_file(path, 1 << 20, &text, NULL) == 0)
        o = json_loads(text, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        o = json_pack("{s:[],s:{}}", "builds", "tags");
    }
    return o;
}

static int record_save(const struct sbxd *d, const char *name, json_t *o, struct sbx_err *err)
{
    _cleanup_free_ char *dir = sbx_xasprintf("%s/.e2b-tags", d->cfg.template_cache);
    _cleanup_free_ char *path = record_path(d, name);
    _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    int r = sbx_mkdir_p(dir, 0755);
    if (r == 0)
        r = sbx_write_file_atomic(path, text, strlen(text), 0644);
    return r < 0 ? sbx_err_sys(err, r == -1 ? errno : -r, "recording the tags of %s", name) : 0;
}

/* The recipe digest of the build the template's name points at now, "" when none. */
static void current_digest(const struct sbxd *d, const char *name, char out[65])
{
    _cleanup_free_ char *link = sbx_xasprintf("%s/%s", d->cfg.template_cache, name);
    char target[256];
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    target[n] = '\0';
    size_t len = strlen(name);
    if (!strncmp(target, name, len) && target[len] == '-')
        snprintf(out, 65, "%s", target + len + 1);
}

/* A build E2B never saw (made by POST /v1/templates or the operator) still has an id: a
 * UUID's shape of its recipe digest, the same every time. */
static void digest_build_id(const char *digest, char out[E2B_BUILD_ID_LEN + 1])
{
    char h[33];
    snprintf(h, sizeof(h), "%-32.32s", digest);
    for (char *c = h; *c; c++)
        if (!isxdigit((unsigned char)*c))
            *c = '0';
    snprintf(out, E2B_BUILD_ID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16,
             h + 20);
}

/* The newest build's id: from the record when E2B built it, else from its digest. */
static void newest_build(const struct sbxd *d, const char *name, json_t *rec,
                         char out[E2B_BUILD_ID_LEN + 1])
{
    char digest[65];
    current_digest(d, name, digest);
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(rec, "builds"), i, b)
    {
        if (!strcmp(json_string_value(json_object_get(b, "digest")) ?: "", digest)) {
            snprintf(out, E2B_BUILD_ID_LEN + 1, "%s",
                     json_string_value(json_object_get(b, "buildID")));
            return;
        }
    }
    digest_build_id(digest, out);
}

int e2b_tags_built(struct sbxd *d, const char *name, const char *build_id, const char *digest,
                   json_t *tags, struct sbx_err *err)
{
    json_t *rec = record_load(d, name);
    json_t *builds = json_object_get(rec, "builds"), *map = json_object_get(rec, "tags");
    long long now = sbx_wall_ms() / 1000;
    json_array_insert_new(builds, 0,
                          json_pack("{s:s,s:s,s:I}", "buildID", build_id, "digest", digest,
                                    "createdAt", (json_int_t)now));
    while (json_array_size(builds) > E2B_BUILDS_KEPT)
        json_array_remove(builds, json_array_size(builds) - 1);
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t)
        json_object_set_new(map, json_string_value(t),
                            json_pack("{s:s,s:I}", "buildID", build_id, "createdAt",
                                      (json_int_t)now));
    int r = record_save(d, name, rec, err);
    json_decref(rec);
    return r;
}

int e2b_template_owned(struct sbxd *d, const char *name, const char *user, bool free_ok,
                       struct sbx_err *err)
{
    json_t *m = NULL;
    struct sbx_err lerr = {0};
    if (template_load(d->cfg.template_cache, name, &m, NULL, &lerr) < 0) {
        _cleanup_free_ char *link = sbx_xasprintf("%s/%s", d->cfg.template_cache, name);
        if (free_ok && access(link, F_OK) < 0 && errno == ENOENT)
            return 0;
        return free_ok ? sbx_err_set(err, EEXIST, "template_exists", "Alias '%s' is already used",
                                     name)
                       : sbx_err_set(err, ENOENT, "template_not_found",
                                     "template '%s' not found", name);
    }
    const char *owner = json_string_value(json_object_get(m, "owner"));
    bool visible = template_visible(m, user), mine = owner && !strcmp(owner, user);
    json_decref(m);
    if (mine)
        return 0;
    if (free_ok)
        return sbx_err_set(err, EEXIST, "template_exists", "Alias '%s' is already used", name);
    if (!visible)
        return sbx_err_set(err, ENOENT, "template_not_found", "template '%s' not found", name);
    return sbx_err_set(err, EPERM, "template_not_owner",
                       "You don't have access to sandbox template '%s'", name);
}

int e2b_template_for_create(struct sbxd *d, const char *template_id, char *out, size_t cap,
                            struct sbx_err *err)
{
    const char *colon = strchr(template_id, ':');
    if (!colon) {
        snprintf(out, cap, "%s", e2b_template_base(template_id));
        return 0;
    }
    char name[TEMPLATE_NAME_MAX + 1];
    json_t *tags = json_array();
    int r = e2b_parse_name(template_id, name, tags, err);
    const char *tag = json_string_value(json_array_get(tags, 0));
    if (r == 0 && tag) {
        json_t *rec = record_load(d, name);
        const char *want =
            json_string_value(json_object_get(json_object_get(json_object_get(rec, "tags"), tag),
                                              "buildID"));
        char newest[E2B_BUILD_ID_LEN + 1];
        newest_build(d, name, rec, newest);
        if (!want)
            r = sbx_err_set(err, ENOENT, "invalid_template", "template '%s' has no tag '%s'", name,
                            tag);
        else if (strcmp(want, newest))
            r = sbx_err_set(err, EINVAL, "invalid_template",
                            "tag '%s' of '%s' names an earlier build: sbx serves the newest build "
                            "of a template only (see docs/e2b.md)",
                            tag, name);
        json_decref(rec);
    }
    json_decref(tags);
    if (r == 0)
        snprintf(out, cap, "%s", e2b_template_base(name));
    return r;
}

/* --- routes ------------------------------------------------------------------------------ */

/* GET /templates/aliases/{alias}: 200 for a template the caller may use (or is building),
 * 403 for a name another user holds (the SDK's exists() says true: the name is taken), 404
 * otherwise. */
static void api_alias(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char name[TEMPLATE_NAME_MAX + 1];
    if (e2b_authenticate(d, req) < 0)
        return;
    const char *user = http_req_identity(req)->user;
    json_t *tags = json_array(), *m = NULL;
    if (e2b_parse_name(http_req_param(req, 0), name, tags, &err) < 0)
        goto out;
    struct sbx_err lerr = {0};
    if (template_load(d->cfg.template_cache, name, &m, NULL, &lerr) < 0) {
        if (e2b_template_building(d->e2b_templates, name, user))
            http_respond_json(req, 200, json_pack("{s:s,s:b}", "templateID", name, "public", 0));
        else
            sbx_err_set(&err, ENOENT, "template_not_found", "template '%s' not found", name);
        goto out;
    }
    if (!template_visible(m, user)) {
        sbx_err_set(&err, EPERM, "template_not_owner",
                    "You don't have access to this template alias");
        goto out;
    }
    const char *tag = json_string_value(json_array_get(tags, 0));
    json_t *rec = tag ? record_load(d, name) : NULL;
    if (tag && !json_object_get(json_object_get(rec, "tags"), tag))
        sbx_err_set(&err, ENOENT, "template_not_found", "tag '%s' does not exist for template '%s'",
                    tag, name);
    else
        http_respond_json(req, 200,
                          json_pack("{s:s,s:b}", "templateID", name, "public",
                                    !json_is_string(json_object_get(m, "owner")) ||
                                        json_is_true(json_object_get(m, "shared"))));
    json_decref(rec);
out:
    if (err.code[0])
        e2b_fail(req, &err);
    json_decref(m);
    json_decref(tags);
}

static void api_tags_assign(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char name[TEMPLATE_NAME_MAX + 1];
    json_t *body = NULL, *target_tag = json_array(), *tags = json_array(), *rec = NULL;
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        goto done;
    const char *user = http_req_identity(req)->user;
    if (r < 0)
        goto out;
    json_t *target = json_object_get(body, "target");
    if (!json_is_string(target) ||
        e2b_parse_name(json_string_value(target), name, target_tag, &err) < 0 ||
        e2b_parse_tags(json_object_get(body, "tags"), tags, &err) < 0) {
        if (!err.code[0])
            sbx_err_set(&err, EINVAL, "invalid_request", "target is required (name:tag)");
        goto out;
    }
    if (!json_array_size(tags)) {
        sbx_err_set(&err, EINVAL, "invalid_request", "At least one tag is required");
        goto out;
    }
    if (e2b_template_owned(d, name, user, false, &err) < 0)
        goto out;
    rec = record_load(d, name);
    const char *from = json_string_value(json_array_get(target_tag, 0)) ?: E2B_DEFAULT_TAG;
    char build[E2B_BUILD_ID_LEN + 1];
    json_t *t = json_object_get(json_object_get(rec, "tags"), from);
    if (t)
        snprintf(build, sizeof(build), "%s", json_string_value(json_object_get(t, "buildID")));
    else if (!strcmp(from, E2B_DEFAULT_TAG))
        newest_build(d, name, rec, build);
    else {
        sbx_err_set(&err, ENOENT, "template_not_found", "Template '%s' with tag '%s' not found",
                    name, from);
        goto out;
    }
    size_t i;
    json_t *v;
    json_array_foreach(tags, i, v)
        json_object_set_new(json_object_get(rec, "tags"), json_string_value(v),
                            json_pack("{s:s,s:I}", "buildID", build, "createdAt",
                                      (json_int_t)(sbx_wall_ms() / 1000)));
    if (record_save(d, name, rec, &err) < 0)
        goto out;
    http_respond_json(req, 201, json_pack("{s:s,s:O}", "buildID", build, "tags", tags));
out:
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.tags", NULL,
                 err.code[0] ? err.code : "ok",
                 json_pack("{s:s,s:s,s:s,s:O}", "via", "e2b", "op", "assign", "target",
                           json_string_value(json_object_get(body, "target")) ?: "", "tags",
                           tags));
    if (err.code[0])
        e2b_fail(req, &err);
done:
    json_decref(rec);
    json_decref(body);
    json_decref(tags);
    json_decref(target_tag);
}

static void api_tags_remove(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char name[TEMPLATE_NAME_MAX + 1] = "";
    json_t *body = NULL, *tags = json_array(), *tag = json_array(), *rec = NULL;
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        goto done;
    if (r < 0)
        goto out;
    json_t *n = json_object_get(body, "name");
    if (!json_is_string(n) || e2b_parse_name(json_string_value(n), name, tag, &err) < 0 ||
        e2b_parse_tags(json_object_get(body, "tags"), tags, &err) < 0) {
        if (!err.code[0])
            sbx_err_set(&err, EINVAL, "invalid_request", "name is required");
        goto out;
    }
    size_t i;
    json_t *v;
    if (json_array_size(tag) || strchr(json_string_value(n), ':'))
        sbx_err_set(&err, EINVAL, "invalid_request",
                    "Template name should not contain a tag, use the 'tags' field instead");
    else if (!json_array_size(tags))
        sbx_err_set(&err, EINVAL, "invalid_request", "At least one tag is required");
    json_array_foreach(tags, i, v) if (!err.code[0] &&
                                       !strcmp(json_string_value(v), E2B_DEFAULT_TAG))
        sbx_err_set(&err, EINVAL, "invalid_request", "Cannot delete the '%s' tag",
                    E2B_DEFAULT_TAG);
    if (err.code[0] || e2b_template_owned(d, name, http_req_identity(req)->user, false, &err) < 0)
        goto out;
    rec = record_load(d, name);
    json_array_foreach(tags, i, v) json_object_del(json_object_get(rec, "tags"),
                                                   json_string_value(v));
    if (record_save(d, name, rec, &err) == 0)
        http_respond_text(req, 204, "");
out:
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.tags", NULL,
                 err.code[0] ? err.code : "ok",
                 json_pack("{s:s,s:s,s:s,s:O}", "via", "e2b", "op", "remove", "name", name, "tags",
                           tags));
    if (err.code[0])
        e2b_fail(req, &err);
done:
    json_decref(rec);
    json_decref(body);
    json_decref(tags);
    json_decref(tag);
}

/* The opening of the reads of one template: the key checked, then the template the
 * caller owns (or may use) by its templateID (name), its manifest in *manifest; -1 once
 * the request was answered with the error. */
static int template_of(struct sbxd *d, struct http_req *req, char name[], json_t **manifest)
{
    struct sbx_err err = {0}, lerr = {0};
    *manifest = NULL;
    if (e2b_authenticate(d, req) < 0)
        return -1;
    if (e2b_parse_name(http_req_param(req, 0), name, NULL, &err) == 0 &&
        (template_load(d->cfg.template_cache, name, manifest, NULL, &lerr) < 0 ||
         !template_visible(*manifest, http_req_identity(req)->user))) {
        json_decref(*manifest);
        *manifest = NULL;
        sbx_err_set(&err, ENOENT, "template_not_found", "template '%s' not found", name);
    }
    if (err.code[0]) {
        e2b_fail(req, &err);
        return -1;
    }
    return 0;
}

static void api_tags_list(struct sbxd *d, struct http_req *req)
{
    char name[TEMPLATE_NAME_MAX + 1];
    json_t *m = NULL;
    if (template_of(d, req, name, &m) < 0)
        return;
    json_t *rec = record_load(d, name), *out = json_array(), *v;
    const char *tag;
    json_object_foreach(json_object_get(rec, "tags"), tag, v)
        json_array_append_new(out, json_pack("{s:s,s:O,s:o}", "tag", tag, "buildID",
                                             json_object_get(v, "buildID"), "createdAt",
                                             e2b_rfc3339(json_integer_value(
                                                 json_object_get(v, "createdAt")))));
    if (!json_object_get(json_object_get(rec, "tags"), E2B_DEFAULT_TAG)) {
        char build[E2B_BUILD_ID_LEN + 1];
        newest_build(d, name, rec, build);
        json_array_insert_new(out, 0,
                              json_pack("{s:s,s:s,s:o}", "tag", E2B_DEFAULT_TAG, "buildID", build,
                                        "createdAt",
                                        e2b_rfc3339(json_integer_value(
                                            json_object_get(m, "created_at")))));
    }
    json_decref(rec);
    json_decref(m);
    http_respond_json(req, 200, out);
}

/* E2B's TemplateWithBuilds: the newest build, and those E2B made before it. */
/* GET /templates: E2B's list of the templates a key may start (its team's and the public
 * ones), here the ones GET /v1/templates lists for the key's user. */
static void api_templates_list(struct sbxd *d, struct http_req *req)
{
    if (e2b_authenticate(d, req) < 0)
        return;
    json_t *mine = templates_list(d, http_req_identity(req)->user), *out = json_array(), *t;
    size_t i;
    json_array_foreach(mine, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        long long at = json_integer_value(json_object_get(t, "created_at"));
        bool public = !json_is_true(json_object_get(t, "custom")) ||
                      json_is_true(json_object_get(t, "public"));
        json_array_append_new(
            out, json_pack("{s:s,s:[s],s:[s],s:b,s:i,s:i,s:o,s:o,s:s,s:s}", "templateID", name,
                           "aliases", name, "names", name, "public", public, "cpuCount", 1,
                           "memoryMB", 1024, "createdAt", e2b_rfc3339(at), "updatedAt",
                           e2b_rfc3339(at), "buildStatus", "ready", "envdVersion",
                           E2B_ENVD_VERSION));
    }
    json_decref(mine);
    http_respond_json(req, 200, out);
}

static void api_template_get(struct sbxd *d, struct http_req *req)
{
    char name[TEMPLATE_NAME_MAX + 1], newest[E2B_BUILD_ID_LEN + 1];
    json_t *m = NULL;
    if (template_of(d, req, name, &m) < 0)
        return;
    json_t *rec = record_load(d, name), *builds = json_array(), *b;
    long long created = json_integer_value(json_object_get(m, "created_at"));
    newest_build(d, name, rec, newest);
    json_t *first = json_pack("{s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:s}", "buildID", newest, "status",
                              "ready", "cpuCount", 1, "memoryMB", 1024, "createdAt",
                              e2b_rfc3339(created), "updatedAt", e2b_rfc3339(created),
                              "finishedAt", e2b_rfc3339(created), "envdVersion", E2B_ENVD_VERSION);
    json_array_append_new(builds, first);
    size_t i;
    json_array_foreach(json_object_get(rec, "builds"), i, b)
    {
        const char *id = json_string_value(json_object_get(b, "buildID"));
        long long at = json_integer_value(json_object_get(b, "createdAt"));
        if (id && strcmp(id, newest))
            json_array_append_new(
                builds, json_pack("{s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:s}", "buildID", id, "status",
                                  "ready", "cpuCount", 1, "memoryMB", 1024, "createdAt",
                                  e2b_rfc3339(at), "updatedAt", e2b_rfc3339(at), "finishedAt",
                                  e2b_rfc3339(at), "envdVersion", E2B_ENVD_VERSION));
    }
    bool public = !json_is_string(json_object_get(m, "owner")) ||
                  json_is_true(json_object_get(m, "shared"));
    http_respond_json(req, 200,
                      json_pack("{s:s,s:[s],s:[s],s:b,s:o,s:o,s:n,s:i,s:i,s:o}", "templateID",
                                name, "aliases", name, "names", name, "public", public,
                                "createdAt", e2b_rfc3339(created), "updatedAt",
                                e2b_rfc3339(created), "lastSpawnedAt", "spawnCount", 0,
                                "buildCount", (int)json_array_size(builds), "builds", builds));
    json_decref(rec);
    json_decref(m);
}

/* DELETE /templates/{id}: a custom template, as DELETE /v1/templates/{name} (its owner's;
 * 404 for what the caller cannot see, so the SDK answers false). The same route deletes
 * snapshots (e2b_snapshots.c), whose ids are not template names: they are tried first. */
static void api_template_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char name[TEMPLATE_NAME_MAX + 1] = "";
    if (e2b_authenticate(d, req) < 0 || e2b_snapshot_delete(d, req))
        return;
    int r = e2b_parse_name(http_req_param(req, 0), name, NULL, &err);
    if (r < 0) /* no template has such a name: E2B's 404 (deleteSnapshot answers false) */
        r = sbx_err_set(&err, ENOENT, "template_not_found", "template '%.64s' not found",
                        http_req_param(req, 0));
    else
        r = template_delete(d->builds, http_req_identity(req), name, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.delete",
                 NULL, r < 0 ? err.code : "ok", json_pack("{s:s,s:s}", "via", "e2b", "name", name));
    if (r < 0) {
        e2b_fail(req, &err);
        return;
    }
    _cleanup_free_ char *path = record_path(d, name);
    if (unlink(path) < 0 && errno != ENOENT)
        log_warn("removing %s: %s", path, strerror(errno));
    http_respond_text(req, 204, "");
}

static const struct route routes[] = {
    {"GET", "/e2b/api/templates", AUTH_PUBLIC, api_templates_list, 0},
    {"GET", "/e2b/api/templates/aliases/{}", AUTH_PUBLIC, api_alias, 0},
    {"POST", "/e2b/api/templates/tags", AUTH_PUBLIC, api_tags_assign, 0},
    {"DELETE", "/e2b/api/templates/tags", AUTH_PUBLIC, api_tags_remove, 0},
    {"GET", "/e2b/api/templates/{}/tags", AUTH_PUBLIC, api_tags_list, 0},
    {"GET", "/e2b/api/templates/{}", AUTH_PUBLIC, api_template_get, 0},
    {"DELETE", "/e2b/api/templates/{}", AUTH_PUBLIC, api_template_delete, 0},
};

const struct route_table e2b_template_tag_routes = ROUTE_TABLE(routes);
