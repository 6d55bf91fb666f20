#include "template.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"

#define MANIFEST_MAX (1024 * 1024)

bool template_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TEMPLATE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return true;
}

/* The recipes shipped in templates/ of the checkout (docs/templates.md). */
static const char *const shipped[] = {"base", "office", "desktop"};

int template_not_built(const char *name, struct sbx_err *err)
{
    for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++)
        if (!strcmp(name, shipped[i]))
            return sbx_err_set(err, ENOENT, "invalid_template",
                               "template %s is not built here: the operator builds it with "
                               "scripts/build-template.sh %s (make run builds base and office)",
                               name, name);
    return sbx_err_set(err, ENOENT, "invalid_template",
                       "template %s is not built here: GET /v1/templates lists those that are; "
                       "POST /v1/templates builds a custom one (docs/templates.md)",
                       name);
}

int template_load(const char *cache, const char *name, json_t **manifest, char **dir_out,
                  struct sbx_err *err)
{
    if (!template_name_valid(name))
        return sbx_err_set(err, EINVAL, "invalid_template", "template names are [a-z0-9-]");
    _cleanup_free_ char *link = sbx_xasprintf("%s/%s", cache, name);
    char dir[PATH_MAX];
    if (!realpath(link, dir))
        return template_not_built(name, err);
    _cleanup_free_ char *manifest_path = sbx_xasprintf("%s/manifest.json", dir);
    _cleanup_free_ char *rootfs = sbx_xasprintf("%s/rootfs", dir);
    _cleanup_free_ char *text = NULL;
    int r = sbx_read_file(manifest_path, MANIFEST_MAX, &text, NULL);
    struct stat st;
    if (r < 0 || stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
        return sbx_err_set(err, ENOENT, "invalid_template", "template %s is incomplete", name);
    json_t *m = json_loads(text, 0, NULL);
    if (!json_is_string(json_object_get(m, "content_digest"))) {
        json_decref(m);
        return sbx_err_set(err, EINVAL, "invalid_template", "template %s has no digest", name);
    }
    *manifest = m;
    if (dir_out)
        *dir_out = sbx_xstrdup(dir);
    return 0;
}

int template_resolve(const char *cache, const char *name, struct template_info *out,
                     struct sbx_err *err)
{
    json_t *m;
    _cleanup_free_ char *dir = NULL;
    int r = template_load(cache, name, &m, &dir, err);
    if (r < 0)
        return r;
    const char *digest = json_string_value(json_object_get(m, "content_digest"));
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", name);
    snprintf(out->digest, sizeof(out->digest), "%s%s",
             strncmp(digest, "sha256:", 7) ? "sha256:" : "", digest);
    out->rootfs = sbx_xasprintf("%s/rootfs", dir);
    const char *owner = json_string_value(json_object_get(m, "owner"));
    snprintf(out->owner, sizeof(out->owner), "%s", owner ? owner : "");
    out->shared = !owner || json_is_true(json_object_get(m, "shared"));
    json_decref(m);
    return 0;
}

bool template_usable(const char *owner, bool shared, const char *user)
{
    return !owner || !owner[0] || shared || !user[0] || !strcmp(owner, user);
}

bool template_visible(json_t *manifest, const char *user)
{
    return template_usable(json_string_value(json_object_get(manifest, "owner")),
                           json_is_true(json_object_get(manifest, "shared")), user);
}

void template_info_clear(struct template_info *t)
{
    free(t->rootfs);
    memset(t, 0, sizeof(*t));
}
