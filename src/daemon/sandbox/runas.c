#include "runas.h"

#include <errno.h>
#include <string.h>

#include "../config.h"
#include "lifecycle.h"

int runas_parse(json_t *v, const char **out, struct sbx_err *err)
{
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    if (s && !strcmp(s, RUNAS_USER))
        *out = RUNAS_USER;
    else if (s && !strcmp(s, RUNAS_ROOT))
        *out = RUNAS_ROOT;
    else
        return sbx_err_set(err, EINVAL, "invalid_user", "user must be \"%s\" or \"%s\"", RUNAS_USER,
                           RUNAS_ROOT);
    return 0;
}

int runas_check(const struct sandbox *sb, const char *user, struct sbx_err *err)
{
    /* A custom template's build sandbox (templates/build.c) belongs to no user and runs only
     * the recipe's apt, npm and run steps, which install as root inside it. */
    if (user && !strcmp(user, RUNAS_ROOT) && !sb->mgr->cfg->allow_root && !sb->build_rootfs)
        return sbx_err_set(err, EPERM, "root_not_allowed",
                           "commands run as \"%s\" here: this server does not allow root "
                           "(SBX_ALLOW_ROOT)",
                           RUNAS_USER);
    return 0;
}

void runas_put(json_t *op, const char *user)
{
    if (user)
        json_object_set_new(op, "user", json_string(user));
}

int runas_apply(const struct sandbox *sb, json_t *body, json_t *op, struct sbx_err *err)
{
    const char *user;
    int r = runas_parse(json_object_get(body, "user"), &user, err);
    if (r < 0 || (r = runas_check(sb, user, err)) < 0)
        return r;
    runas_put(op, user);
    return 0;
}
