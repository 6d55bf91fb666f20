/* SBX_WARM_POOL's and SBX_WARM_SNAPSHOT's texts (poolspec.h), read by the pools (pool.c), by
 * the warm snapshots (warm.c) and by main.c before the start-up, apart from pool.c so that warm.c, which pool.c runs, does not
 * call back into it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "poolspec.h"

int pool_spec_parse(const char *text, struct pool_spec out[POOL_TEMPLATES_MAX], size_t *n,
                    struct sbx_err *err)
{
    *n = 0;
    if (strlen(text) > POOL_SPEC_MAX)
        return sbx_err_set(err, EINVAL, "invalid_config", "SBX_WARM_POOL is longer than %d bytes",
                           POOL_SPEC_MAX);
    _cleanup_free_ char *copy = sbx_xstrdup(text);
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        char *end = NULL;
        long size = colon ? strtol(colon + 1, &end, 10) : -1;
        if (!colon || end == colon + 1 || *end || size < 0 || size > POOL_SIZE_MAX)
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_WARM_POOL: '%.64s' is not template:N with N in 0..%d", item,
                               POOL_SIZE_MAX);
        *colon = '\0';
        if (!template_name_valid(item))
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_WARM_POOL: '%.64s' is not a template name", item);
        for (size_t i = 0; i < *n; i++)
            if (!strcmp(out[i].name, item))
                return sbx_err_set(err, EINVAL, "invalid_config", "SBX_WARM_POOL names %s twice",
                                   item);
        if (*n == POOL_TEMPLATES_MAX)
            return sbx_err_set(err, EINVAL, "invalid_config", "SBX_WARM_POOL: at most %d templates",
                               POOL_TEMPLATES_MAX);
        snprintf(out[*n].name, sizeof(out[*n].name), "%s", item);
        out[*n].size = (int)size;
        (*n)++;
    }
    return 0;
}

int warm_snapshot_parse(const char *text, struct pool_spec out[POOL_TEMPLATES_MAX], size_t *n,
                        struct sbx_err *err)
{
    _cleanup_free_ char *list = sbx_xstrdup(text);
    _cleanup_free_ char *as_pool = sbx_xstrdup("");
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *next = sbx_xasprintf("%s%s%s:1", as_pool, *as_pool ? "," : "", t);
        free(as_pool);
        as_pool = next;
    }
    int r = pool_spec_parse(as_pool, out, n, err);
    if (r < 0)
        return sbx_err_set(err, -r, "invalid_config", "SBX_WARM_SNAPSHOT must list template names");
    return 0;
}

int warm_settings_check(const char *pool, const char *snapshot, struct sbx_err *err)
{
    struct pool_spec spec[POOL_TEMPLATES_MAX];
    size_t n;
    int r = pool ? pool_spec_parse(pool, spec, &n, err) : 0;
    if (r == 0 && snapshot)
        r = warm_snapshot_parse(snapshot, spec, &n, err);
    return r;
}
