/* SBX_WARM_POOL's text (poolspec.c). */
#ifndef SBX_TEMPLATES_POOLSPEC_H
#define SBX_TEMPLATES_POOLSPEC_H

#include <stddef.h>

#include "../../common/err.h"
#include "../sandbox/template.h"

#define POOL_TEMPLATES_MAX 8 /* templates in SBX_WARM_POOL */
#define POOL_SIZE_MAX 16     /* sandboxes kept per template */
#define POOL_SPEC_MAX 512    /* bytes of SBX_WARM_POOL */

struct pool_spec {
    char name[TEMPLATE_NAME_MAX + 1];
    int size;
};

/* "name:N,name:N": names valid template names, each once, N in 0..POOL_SIZE_MAX. */
int pool_spec_parse(const char *text, struct pool_spec out[POOL_TEMPLATES_MAX], size_t *n,
                    struct sbx_err *err);
/* SBX_WARM_SNAPSHOT: the same names without counts ("office" or "office,base"); each size 1. */
int warm_snapshot_parse(const char *text, struct pool_spec out[POOL_TEMPLATES_MAX], size_t *n,
                        struct sbx_err *err);
/* Both settings (either may be NULL), checked before anything starts: a refusal must not wait
 * for the backends' probe, the store and the rest of a start-up. */
int warm_settings_check(const char *pool, const char *snapshot, struct sbx_err *err);

#endif
