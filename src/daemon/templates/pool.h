/* Warm pools: SBX_WARM_POOL=base:2,office:1 keeps that many ready sandboxes of each
 * template, booted for nobody. A create that one can serve takes it (sandbox/create.c
 * makes it the caller's: env, egress, TTL); the pool refills in the background, one
 * sandbox at a time per template, and gives its idle sandboxes up when the host runs
 * short of memory or of v2 capacity. See docs/templates.md. */
#ifndef SBX_TEMPLATES_POOL_H
#define SBX_TEMPLATES_POOL_H

#include <stddef.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../config.h"
#include "../sandbox/manager.h"
#include "../sandbox/template.h"

#include "poolspec.h" /* struct pool_spec, pool_spec_parse */

struct warm_pool;

/* Parse cfg->warm_pool (NULL: no pools), plug into the manager and start filling. Pooled
 * sandboxes left by an earlier run are adopted, or destroyed when no pool wants them. */
int warm_pool_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                  struct warm_pool **out, struct sbx_err *err);
/* Before manager_free: the pool's sandboxes keep running and are adopted on restart. */
void warm_pool_free(struct warm_pool *p);

struct pool_state {
    int size;        /* wanted (0: no pool for this template) */
    int ready;       /* booted and waiting */
    int starting;    /* booting */
    long long taken; /* handed to creates since sbxd started */
    bool yielding;   /* memory is short: not refilling */
};
void warm_pool_state(struct warm_pool *p, const char *template_name, struct pool_state *out);
/* The template's warm snapshot: "none", "warming", "ready" or "failed" (warm.c). */
const char *warm_pool_snapshot_state(struct warm_pool *p, const char *template_name);

#endif
