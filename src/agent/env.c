#include "env.h"

#include <errno.h>
#include <string.h>

#include "../common/sbxuser.h"
#include "../common/util.h"

static const char *const env_base[] = {
    "PATH=" ENV_BASE_PATH,
    ENV_BASE_HOME,
    "LANG=C.UTF-8",
    "TERM=dumb",
};

const char env_user_home[] = "HOME=" SBX_USER_HOME;
const char env_user_user[] = "USER=" SBX_USER_NAME;
const char env_user_logname[] = "LOGNAME=" SBX_USER_NAME;
/* HOME is the workspace: tools' settings and caches (LibreOffice's profile, pip's cache)
 * stay in /tmp, as with the base's HOME=/tmp, instead of filling it. */
const char *const env_user_xdg[ENV_USER_XDG_N] = {"XDG_CONFIG_HOME=/tmp/.config",
                                                  "XDG_CACHE_HOME=/tmp/.cache"};

static const char *env_extra[ENV_BASE_EXTRA_MAX];
static size_t env_nextra;

void env_base_add(const char *kv)
{
    if (env_nextra < ENV_BASE_EXTRA_MAX)
        env_extra[env_nextra++] = kv;
}

bool envv_is_base(const char *kv)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(env_base); i++)
        if (!strcmp(kv, env_base[i]))
            return true;
    for (size_t i = 0; i < env_nextra; i++)
        if (!strcmp(kv, env_extra[i]))
            return true;
    for (size_t i = 0; i < ENV_USER_XDG_N; i++)
        if (!strcmp(kv, env_user_xdg[i]))
            return true;
    return !strcmp(kv, env_user_home) || !strcmp(kv, env_user_user) ||
           !strcmp(kv, env_user_logname);
}

void envv_init_empty(struct envv *e)
{
    *e = (struct envv){.v = sbx_xcalloc(1, sizeof(char *)), .cap = 1};
}

void envv_init_base(struct envv *e)
{
    envv_init_empty(e);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(env_base); i++)
        (void)envv_set(e, env_base[i], strlen(env_base[i]));
    for (size_t i = 0; i < env_nextra; i++)
        (void)envv_set(e, env_extra[i], strlen(env_extra[i]));
}

void envv_copy(struct envv *dst, const struct envv *src)
{
    *dst = (struct envv){.v = sbx_xcalloc(src->n + 1, sizeof(char *)),
                         .n = src->n,
                         .cap = src->n + 1,
                         .bytes = src->bytes};
    for (size_t i = 0; i < src->n; i++)
        dst->v[i] = sbx_xstrdup(src->v[i]);
}

void envv_free(struct envv *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    *e = (struct envv){0};
}

static size_t find_index(const struct envv *e, const char *key, size_t klen)
{
    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], key, klen) && e->v[i][klen] == '=')
            return i;
    return e->n;
}

const char *envv_find(const struct envv *e, const char *key, size_t klen)
{
    size_t i = find_index(e, key, klen);
    return i < e->n ? e->v[i] : NULL;
}

int envv_set(struct envv *e, const char *kv, size_t len)
{
    const char *eq = memchr(kv, '=', len);
    if (!eq || eq == kv || memchr(kv, '\0', len))
        return -EINVAL;
    size_t klen = (size_t)(eq - kv);
    size_t i = find_index(e, kv, klen);
    size_t old = i < e->n ? strlen(e->v[i]) + 1 : 0;
    if (e->bytes - old + len + 1 > ENV_MAX_BYTES || (i == e->n && e->n >= ENV_MAX_VARS))
        return -E2BIG;
    char *s = sbx_xmalloc(len + 1);
    memcpy(s, kv, len);
    s[len] = '\0';
    if (i < e->n) {
        free(e->v[i]);
        e->v[i] = s;
    } else {
        if (e->n + 2 > e->cap) {
            e->cap = e->cap * 2 + 8;
            e->v = sbx_xrealloc(e->v, e->cap * sizeof(char *));
        }
        e->v[e->n++] = s;
        e->v[e->n] = NULL;
    }
    e->bytes = e->bytes - old + len + 1;
    return 0;
}

void envv_unset(struct envv *e, const char *key, size_t klen)
{
    size_t i = find_index(e, key, klen);
    if (i == e->n)
        return;
    e->bytes -= strlen(e->v[i]) + 1;
    free(e->v[i]);
    /* Keep the order: commands see variables in the order they were set. */
    memmove(&e->v[i], &e->v[i + 1], (e->n - i) * sizeof(char *));
    e->n--;
}

int envv_set_json(struct envv *e, json_t *list, const char *field, struct sbx_err *err)
{
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return sbx_err_set(err, EINVAL, "bad_request", "%s must be an array of \"K=V\" strings",
                           field);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        int r = json_is_string(v) ? envv_set(e, json_string_value(v), json_string_length(v))
                                  : -EINVAL;
        if (r == -E2BIG)
            return sbx_err_set(err, E2BIG, "bad_request", "%s: more than %u bytes", field,
                               ENV_MAX_BYTES);
        if (r < 0)
            return sbx_err_set(err, EINVAL, "bad_request", "%s[%zu] is not a \"K=V\" string",
                               field, i);
    }
    return 0;
}
