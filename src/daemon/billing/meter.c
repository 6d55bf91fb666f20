/* Import circle with billing.c (allowed inside a folder, docs/architecture.md#layering):
 * billing.c owns the state and runs the meter (meter.c: billing_run, billing_meter_running),
 * and meter.c takes the constants and types of billing.h that billing.c also serves to
 * the other features. Both are the billing folder's; nothing outside sees the loop. */
/* What the tick does: meter the time v2 sandboxes run and the hours paused snapshots are
 * kept, then settle each finished interval into the wallets (docs/billing.md). */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "../../common/util.h"
#include "../config.h"
#include "../store/usage.h"
#include "../store/volumes.h"
#include "billing.h"
#include "billing_internal.h"
#include "metrics.h"

#define SETTLED_UNTIL "settled_until_ms"
/* A GB-month is 730 hours: a monthly price spread over the hours it is sampled at. */
#define SNAPSHOT_UNIT (1000000000LL * 730)

static int add_usage(struct billing *b, const struct store_sandbox *sb, const char *kind,
                     long long ts, long long amount)
{
    struct store_usage_event e = {.ts_ms = ts,
                                  .user = sb->user,
                                  .key_id = sb->key_id,
                                  .sandbox_id = sb->id,
                                  .backend = sb->backend,
                                  .kind = kind,
                                  .amount = amount};
    return store_usage_add(b->store, &e, NULL);
}

void billing_meter_running(struct billing *b, const struct store_sandbox *sb, long long now)
{
    if (!sb->user[0]) {
        /* A warm-pool sandbox belongs to nobody: its time is the host's, and whoever takes
         * it is metered from then on. */
        (void)store_usage_mark_set(b->store, sb->id, USAGE_V2_RUNNING_MS, now, NULL);
        return;
    }
    long long mark = 0;
    if (store_usage_mark_get(b->store, sb->id, USAGE_V2_RUNNING_MS, &mark, NULL) < 0)
        return;
    /* Never metered yet: from its creation, or from now under a test clock set before it. */
    long long from = mark ? mark : sb->created_at * 1000 < now ? sb->created_at * 1000 : now;
    long long iv = b->cfg->billing_interval_s * 1000;
    for (int n = 0; from < now && n < BILLING_SETTLE_PER_TICK; n++) {
        long long end = (from / iv + 1) * iv;
        if (end > now)
            end = now;
        if (add_usage(b, sb, USAGE_V2_RUNNING_MS, from, end - from) < 0)
            return;
        from = end;
    }
    (void)store_usage_mark_set(b->store, sb->id, USAGE_V2_RUNNING_MS, from, NULL);
}

/* A v2 sandbox costs while it runs, busy or idle. The state hooks make the edges exact;
 * the tick meters what runs in between, and what ran while sbxd was down. */
static void meter_running(struct billing *b, const struct store_sandbox *sb, long long now)
{
    if (!strcmp(sb->status, SANDBOX_RUNNING)) {
        billing_meter_running(b, sb, now);
        return;
    }
    long long mark = 0;
    /* Paused time is the snapshot's, not running time. */
    if (!strcmp(sb->status, SANDBOX_PAUSED) &&
        store_usage_mark_get(b->store, sb->id, USAGE_V2_RUNNING_MS, &mark, NULL) == 0 && mark < now)
        (void)store_usage_mark_set(b->store, sb->id, USAGE_V2_RUNNING_MS, now, NULL);
}

static long long walk_bytes;
static int add_size(const char *path, const struct stat *st, int type, struct FTW *f)
{
    if (type == FTW_F)
        walk_bytes += st->st_size;
    return 0;
}

/* The memory image a paused sandbox keeps (snapshot/pause.c writes it there). */
static long long snapshot_bytes(struct billing *b, const char *id)
{
    _cleanup_free_ char *dir =
        sbx_xasprintf("%s/sandboxes/%s/snapshots/memory", b->cfg->data_dir, id);
    walk_bytes = 0;
    if (nftw(dir, add_size, 8, FTW_PHYS) < 0)
        return 0;
    return walk_bytes;
}

/* A paused snapshot is sampled at each full hour it is kept: its bytes for that hour. */
/* Usage sampled at each full hour something is kept (a paused snapshot, a volume): e says
 * whose and of what kind (its sandbox_id keys the mark), bytes what it holds now; each
 * sample is dated at_end_ms after its hour's start. */
static void sample_hourly(struct billing *b, struct store_usage_event e, long long now,
                          long long (*bytes_of)(struct billing *b, const char *id),
                          long long at_end_ms)
{
    long long mark = 0;
    if (store_usage_mark_get(b->store, e.sandbox_id, e.kind, &mark, NULL) < 0)
        return;
    if (!mark) {
        (void)store_usage_mark_set(b->store, e.sandbox_id, e.kind, now - now % BILLING_HOUR_MS,
                                   NULL);
        return;
    }
    if (mark + BILLING_HOUR_MS > now)
        return;
    long long bytes = bytes_of(b, e.sandbox_id);
    for (int n = 0; mark + BILLING_HOUR_MS <= now && n < BILLING_SETTLE_PER_TICK; n++) {
        e.ts_ms = mark + at_end_ms;
        e.amount = bytes;
        if (bytes > 0 && store_usage_add(b->store, &e, NULL) < 0)
            return;
        mark += BILLING_HOUR_MS;
    }
    (void)store_usage_mark_set(b->store, e.sandbox_id, e.kind, mark, NULL);
}

static void meter_snapshot(struct billing *b, const struct store_sandbox *sb, long long now)
{
    if (strcmp(sb->status, SANDBOX_PAUSED)) {
        long long mark = 0;
        if (store_usage_mark_get(b->store, sb->id, USAGE_SNAPSHOT_BYTE_HOURS, &mark, NULL) == 0 &&
            mark)
            (void)store_usage_mark_set(b->store, sb->id, USAGE_SNAPSHOT_BYTE_HOURS, 0, NULL);
        return;
    }
    struct store_usage_event e = {.user = sb->user,
                                  .key_id = sb->key_id,
                                  .sandbox_id = sb->id,
                                  .backend = sb->backend,
                                  .kind = USAGE_SNAPSHOT_BYTE_HOURS};
    sample_hourly(b, e, now, snapshot_bytes, 0);
}

/* What a volume's files take (docs/volumes.md): its quota image's used blocks, or a walk of
 * a plain directory. */
static long long volume_bytes(struct billing *b, const char *id)
{
    _cleanup_free_ char *root = sbx_xasprintf("%s/%s/data", b->cfg->volumes_dir, id);
    _cleanup_free_ char *parent = sbx_xasprintf("%s/%s", b->cfg->volumes_dir, id);
    struct stat a, p;
    struct statvfs v;
    if (stat(root, &a) < 0 || stat(parent, &p) < 0)
        return 0;
    if (a.st_dev != p.st_dev && statvfs(root, &v) == 0)
        return (long long)(v.f_blocks - v.f_bfree) * (long long)v.f_frsize;
    walk_bytes = 0;
    if (nftw(root, add_size, 8, FTW_PHYS) < 0)
        return 0;
    return walk_bytes;
}

struct meter_ctx {
    struct billing *b;
    long long now;
};

/* A volume is sampled at each full hour it exists, on its node, billed at
 * SBX_PRICE_VOLUME_GB_MONTH_MICRO_EUR. Dated at the hour's end, when it is known whole: in
 * an interval still to be settled (the hour's start may be settled already). */
static void meter_volume(const struct store_volume *vol, void *data)
{
    struct meter_ctx *c = data;
    if (strcmp(vol->node_id, store_node(c->b->store)))
        return;
    struct store_usage_event e = {.user = vol->user,
                                  .key_id = "",
                                  .sandbox_id = vol->id,
                                  .backend = "volume",
                                  .kind = USAGE_VOLUME_BYTE_HOURS};
    sample_hourly(c->b, e, c->now, volume_bytes, BILLING_HOUR_MS);
}

static void meter_one(const struct store_sandbox *sb, void *data)
{
    struct meter_ctx *c = data;
    if (strcmp(sb->backend, "v2"))
        return;
    meter_running(c->b, sb, c->now);
    meter_snapshot(c->b, sb, c->now);
}

struct users {
    char **v;
    size_t n;
};

static void collect_user(const char *user, void *data)
{
    struct users *u = data;
    u->v = sbx_xrealloc(u->v, (u->n + 1) * sizeof(*u->v));
    u->v[u->n++] = sbx_xstrdup(user);
}

/* One kind's charge for [lo, end), given what the month used before lo. */
static int charge_of(struct billing *b, const char *user, const char *kind, const char *backend,
                     long long from, long long lo, long long end, long long free_units,
                     long long price, long long unit, long long *used, long long *charge)
{
    long long before;
    int r;
    if ((r = store_usage_sum(b->store, user, NULL, kind, backend, from, lo, &before, NULL)) < 0 ||
        (r = store_usage_sum(b->store, user, NULL, kind, backend, lo, end, used, NULL)) < 0)
        return r;
    *charge = billing_cost(before + *used, free_units, price, unit) -
              billing_cost(before, free_units, price, unit);
    return 0;
}

static int settle_user(struct billing *b, const char *user, long long a, long long end)
{
    const struct sbxd_config *cfg = b->cfg;
    long long start = cfg->billing_start_s * 1000;
    if (end <= start)
        return 0;
    long long lo = a > start ? a : start;
    long long month = billing_month_start(a);
    long long from = month > start ? month : start;
    long long exec_ms, run_ms, snap_bh, vol_bh, c_exec, c_run, c_snap, c_vol;
    int r;
    /* v1 pays its exec time; v2 pays the time it runs, which already holds its execs. */
    if ((r = charge_of(b, user, USAGE_EXEC_MS, "v1", from, lo, end, cfg->free_exec_s * 1000,
                       cfg->price_exec_hour, BILLING_HOUR_MS, &exec_ms, &c_exec)) < 0 ||
        (r = charge_of(b, user, USAGE_V2_RUNNING_MS, NULL, from, lo, end, cfg->free_v2_s * 1000,
                       cfg->price_v2_hour, BILLING_HOUR_MS, &run_ms, &c_run)) < 0 ||
        (r = charge_of(b, user, USAGE_SNAPSHOT_BYTE_HOURS, NULL, from, lo, end, 0,
                       cfg->price_snapshot_gb_month, SNAPSHOT_UNIT, &snap_bh, &c_snap)) < 0 ||
        (r = charge_of(b, user, USAGE_VOLUME_BYTE_HOURS, NULL, from, lo, end, 0,
                       cfg->price_volume_gb_month, SNAPSHOT_UNIT, &vol_bh, &c_vol)) < 0)
        return r;
    long long total = c_exec + c_run + c_snap + c_vol;
    if (total <= 0)
        return 0;
    json_t *d =
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "v1_exec_ms", (json_int_t)exec_ms,
                  "v1_exec_micro_eur", (json_int_t)c_exec, "v2_running_ms", (json_int_t)run_ms,
                  "v2_running_micro_eur", (json_int_t)c_run, "snapshot_byte_hours",
                  (json_int_t)snap_bh, "snapshot_micro_eur", (json_int_t)c_snap);
    if (vol_bh) {
        json_object_set_new(d, "volume_byte_hours", json_integer(vol_bh));
        json_object_set_new(d, "volume_micro_eur", json_integer(c_vol));
    }
    _cleanup_free_ char *details = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    struct store_ledger_entry e = {.user = user,
                                   .ts_ms = end,
                                   .source = LEDGER_SANDBOX_CHARGE,
                                   .amount = -total,
                                   .interval_start_ms = a,
                                   .interval_end_ms = end,
                                   .details = details};
    if ((r = store_wallet_post(b->store, &e, NULL)) < 0)
        return r;
    metrics_add(M_CHARGED, "", (double)total);
    return 0;
}

/* [a, end) lands whole or not at all, with the watermark: a crash never charges twice.
 * Under the store's write lock, with the watermark read again inside: of nodes settling
 * the same interval, the first does it and the others find it done. */
static int settle_interval(struct billing *b, long long a, long long end)
{
    struct users u = {0};
    int r = store_tx_begin_locked(b->store, NULL);
    if (r < 0)
        return r;
    long long wm;
    if (store_billing_get(b->store, SETTLED_UNTIL, &wm, NULL) == 0 && wm >= end)
        return store_tx_end(b->store, true, NULL);
    r = store_usage_users(b->store, a, end, collect_user, &u, NULL);
    for (size_t i = 0; r == 0 && i < u.n; i++)
        r = settle_user(b, u.v[i], a, end);
    if (r == 0)
        r = store_billing_set(b->store, SETTLED_UNTIL, end, NULL);
    for (size_t i = 0; i < u.n; i++)
        free(u.v[i]);
    free(u.v);
    if (r < 0) {
        (void)store_tx_end(b->store, false, NULL);
        return r;
    }
    if ((r = store_tx_end(b->store, true, NULL)) == 0)
        metrics_add(M_SETTLEMENTS, "", 1);
    return r;
}

void billing_run(struct billing *b, long long now)
{
    struct meter_ctx c = {b, now};
    if (store_tx_begin(b->store, NULL) == 0) {
        /* Each node meters the sandboxes it runs. */
        int r = store_sandbox_each_live(b->store, NULL, store_node(b->store), meter_one, &c,
                                        NULL);
        if (r == 0)
            r = store_volume_each(b->store, NULL, meter_volume, &c, NULL);
        (void)store_tx_end(b->store, r == 0, NULL);
    }
    long long iv = b->cfg->billing_interval_s * 1000, wm;
    int r = store_billing_get(b->store, SETTLED_UNTIL, &wm, NULL);
    if (r == -ENOENT) {
        wm = now - now % iv;
        r = store_billing_set(b->store, SETTLED_UNTIL, wm, NULL);
    }
    for (int n = 0; r == 0 && wm + iv <= now && n < BILLING_SETTLE_PER_TICK; n++, wm += iv)
        r = settle_interval(b, wm, wm + iv);
}
