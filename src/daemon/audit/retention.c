#include "retention.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../auth/signurl.h"

_Static_assert(SIGNURL_KEY_LEN == sizeof(((struct store_anchor_key *)0)->k),
               "the anchor key is a signing key of the same size");

struct retention {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct store *store;
    struct loop_timer *timer;
    struct store_anchor_key key;
};

static void on_tick(struct loop *l, void *data);

static void schedule(struct retention *r, long long ms)
{
    r->timer = loop_timer_add(r->loop, ms, on_tick, r);
}

typedef int (*prune_fn)(struct retention *r, const struct store_prune *p, long long *removed,
                        struct sbx_err *err);

static int prune_execs(struct retention *r, const struct store_prune *p, long long *removed,
                       struct sbx_err *err)
{
    return store_exec_prune(r->store, p, removed, err);
}

static int prune_egress(struct retention *r, const struct store_prune *p, long long *removed,
                        struct sbx_err *err)
{
    return store_egress_log_prune(r->store, p->before_ms, p->batch, removed, err);
}

static int prune_audit(struct retention *r, const struct store_prune *p, long long *removed,
                       struct sbx_err *err)
{
    return store_audit_prune(r->store, p, sbx_wall_ms(), &r->key, removed, err);
}

/* One batch of what the days (0: any age) and the count (0: any number) keep; true when
 * a full batch went (more may be left). */
static bool prune_one(struct retention *r, const char *what, long long days, long long keep,
                      prune_fn fn)
{
    if (days <= 0 && keep <= 0)
        return false;
    struct store_prune p = {
        .before_ms = days > 0 ? sbx_wall_ms() - days * r->cfg->retain_day_ms : 0,
        .keep = keep,
        .batch = RETENTION_BATCH,
    };
    long long removed = 0;
    struct sbx_err err = {0};
    if (fn(r, &p, &removed, &err) < 0) {
        log_warn("retention: %s: %s", what, err.msg);
        return false;
    }
    if (removed)
        log_debug("retention: %lld %s pruned", removed, what);
    return removed >= RETENTION_BATCH;
}

static void on_tick(struct loop *l, void *data)
{
    struct retention *r = data;
    r->timer = NULL;
    const struct sbxd_config *c = r->cfg;
    bool more = prune_one(r, "exec records", c->retain_exec_days, c->retain_exec_max, prune_execs);
    more |= prune_one(r, "egress log entries", c->retain_egress_days, 0, prune_egress);
    more |= prune_one(r, "audit entries", c->retain_audit_days, c->retain_audit_max, prune_audit);
    /* A backlog goes a batch per turn, letting requests in between. */
    schedule(r, more ? 0 : c->retain_every_ms);
}

int retention_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                  struct retention **out, struct sbx_err *err)
{
    struct retention *r = sbx_xcalloc(1, sizeof(*r));
    r->cfg = cfg;
    r->loop = l;
    r->store = st;
    _cleanup_free_ char *path = sbx_xasprintf("%s/audit-anchor.key", cfg->data_dir);
    struct signurl_key k;
    int rc = signurl_key_load(path, &k, err);
    if (rc < 0) {
        free(r);
        return rc;
    }
    memcpy(r->key.k, k.k, sizeof(r->key.k));
    OPENSSL_cleanse(&k, sizeof(k));
    /* The first pass soon after start, not on the start's critical path. */
    schedule(r, 1000 < cfg->retain_every_ms ? 1000 : cfg->retain_every_ms);
    *out = r;
    return 0;
}

void retention_free(struct retention *r)
{
    if (!r)
        return;
    if (r->timer)
        loop_timer_cancel(r->loop, r->timer);
    OPENSSL_cleanse(&r->key, sizeof(r->key));
    free(r);
}

const struct store_anchor_key *retention_anchor_key(const struct retention *r)
{
    return &r->key;
}
