/* DELETE /v1/templates/{name}: a custom template leaves the cache's namespace at once (its
 * link goes), its trees go in the background. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../sandbox/template.h"
#include "build_internal.h"

struct users {
    const char *name;
    char list[256];
    size_t n;
};

static void uses_cb(struct sandbox *sb, void *data)
{
    struct users *u = data;
    if (sb->ended || strcmp(sb->rec.template_name, u->name))
        return;
    size_t len = strlen(u->list);
    if (u->n++ < 8)
        snprintf(u->list + len, sizeof(u->list) - len, "%s%s", len ? ", " : "", sb->rec.id);
}

static bool is_build_dir(const char *d_name, const char *name)
{
    size_t n = strlen(name), len = strlen(d_name);
    if (len != n + 1 + 64 || strncmp(d_name, name, n) || d_name[n] != '-')
        return false;
    for (size_t i = n + 1; i < len; i++)
        if (!((d_name[i] >= '0' && d_name[i] <= '9') || (d_name[i] >= 'a' && d_name[i] <= 'f')))
            return false;
    return true;
}

int template_delete(struct template_builds *b, const struct auth_identity *who, const char *name,
                    struct sbx_err *err)
{
    const char *cache = b->cfg->template_cache;
    json_t *m = NULL;
    struct sbx_err lerr = {0};
    bool found = template_name_valid(name) && template_load(cache, name, &m, NULL, &lerr) == 0;
    if (!found || !template_visible(m, who->user)) {
        json_decref(m);
        return sbx_err_set(err, ENOENT, "template_not_found", "no template named %.64s here", name);
    }
    _cleanup_free_ char *owner = json_is_string(json_object_get(m, "owner"))
                                     ? sbx_xstrdup(json_string_value(json_object_get(m, "owner")))
                                     : NULL;
    json_decref(m);
    if (!owner)
        return sbx_err_set(err, EBUSY, "template_builtin",
                           "%s is one of the operator's templates (scripts/build-template.sh): "
                           "it is not deleted through the API",
                           name);
    if (strcmp(owner, who->user) && who->role != AUTH_ROLE_ADMIN)
        return sbx_err_set(err, EPERM, "template_not_owner",
                           "only its owner or an admin deletes template %s", name);
    if (template_build_running(b, name))
        return sbx_err_set(err, EBUSY, "template_building",
                           "a build of (or from) %s is under way: wait for it to end", name);
    struct users u = {.name = name};
    manager_each(b->mgr, NULL, uses_cb, &u);
    if (u.n)
        return sbx_err_set(err, EBUSY, "template_in_use",
                           "%zu sandbox(es) use template %s (%s%s): delete them first", u.n, name,
                           u.list, u.n > 8 ? ", ..." : "");
    _cleanup_free_ char *link = sbx_xasprintf("%s/%s", cache, name);
    if (unlink(link) < 0)
        return sbx_err_sys(err, errno, "removing %s", name);
    /* Its builds leave the cache's namespace at once, and the disk in the background. */
    DIR *d = opendir(cache);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (!is_build_dir(de->d_name, name))
            continue;
        _cleanup_free_ char *from = sbx_xasprintf("%s/%s", cache, de->d_name);
        _cleanup_free_ char *to = sbx_xasprintf("%s/.build-deleted-%s", cache, de->d_name);
        if (rename(from, to) == 0)
            build_remove_later(b, to);
    }
    if (d)
        closedir(d);
    template_build_forget(b, name);
    log_info("template %s (of %s) deleted by %s", name, owner, who->user);
    return 0;
}
