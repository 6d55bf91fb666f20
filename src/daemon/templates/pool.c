#include "pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../billing/metrics.h"
#include "warm.h"

#define POOL_TICK_MS 2000         /* how often pools are checked against what runs */
#define POOL_BACKOFF_MAX_MS 60000 /* a template that fails to boot is retried this rarely */
#define POOL_REFILL_DELAY_MS 100  /* after a take, before the refill starts */

struct pool_entry {
    struct pool_spec spec;
    int failures;       /* boots that failed in a row */
    long long retry_at; /* monotonic ms: no boot before */
    long long taken;
};

struct warm_pool {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct manager *mgr;
    struct pool_entry e[POOL_TEMPLATES_MAX];
    size_t n;
    struct loop_timer *tick;
    bool yielding;
    struct warm_images *images; /* the templates' warm snapshots (warm.c) */
};

static struct pool_entry *entry_of(struct warm_pool *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->e[i].spec.name, name))
            return &p->e[i];
    return NULL;
}

/* MemAvailable in MiB, or -1 when /proc/meminfo cannot tell. */
static long long mem_available_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[128];
    long long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

/* A pooled sandbox that a create may take right now. */
static bool member_ready(const struct sandbox *sb)
{
    return sb->ready && sb->chan && !sb->ended && !sb->paused && !sb->pausing;
}

struct census {
    const char *name;
    const char *digest; /* the template's current build; NULL: keep any */
    bool warm;          /* the template's warm snapshot is ready: members are restored from it */
    int ready, starting;
    struct sandbox *idle;  /* one ready member */
    struct sandbox *stale; /* one member booted from an older build, paused, or cold */
};

static void count_member(struct sandbox *sb, void *data)
{
    struct census *c = data;
    if (!sandbox_is_pooled(sb) || sb->ended || sb->warm_holder)
        return;
    if (strcmp(sb->rec.template_name, c->name))
        return;
    /* Paused: a warm snapshot's holder from before a restart (warm.c makes a new one). */
    if (sb->paused || (c->digest && strcmp(sb->rec.template_digest, c->digest)) ||
        (c->warm && !sb->from_warm_image)) {
        c->stale = sb;
        return;
    }
    if (member_ready(sb)) {
        c->ready++;
        c->idle = sb;
    } else {
        c->starting++;
    }
}

static void schedule(struct warm_pool *p, long long ms);

static void on_member_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct warm_pool *p = data;
    struct pool_entry *e = entry_of(p, sb->rec.template_name);
    if (e && err) {
        e->failures++;
        long long wait = 1000LL << (e->failures < 6 ? e->failures : 6);
        e->retry_at = sbx_now_ms() + (wait < POOL_BACKOFF_MAX_MS ? wait : POOL_BACKOFF_MAX_MS);
        log_warn("warm pool %s: a sandbox did not start: %s", e->spec.name, err->msg);
    } else if (e) {
        e->failures = 0;
    }
    schedule(p, 0);
}

static void destroy_member(struct warm_pool *p, struct sandbox *sb, const char *why)
{
    struct sbx_err err = {0};
    log_info("warm pool %s: giving up %s (%s)", sb->rec.template_name, sb->rec.id, why);
    if (manager_destroy(p->mgr, sb, "pool_yield", &err) < 0)
        log_error("warm pool: destroying %s: %s", sb->rec.id, err.msg);
}

/* Pooled sandboxes no configured pool wants (a template dropped from SBX_WARM_POOL). */
static void count_orphan(struct sandbox *sb, void *data)
{
    struct warm_pool *p = ((void **)data)[0];
    struct sandbox **orphan = ((void **)data)[1];
    if (sandbox_is_pooled(sb) && !sb->ended && !sb->warm_holder) {
        struct pool_entry *e = entry_of(p, sb->rec.template_name);
        if (!e || e->spec.size == 0)
            *orphan = sb;
    }
}

static void fill_one(struct warm_pool *p, struct pool_entry *e, long long now)
{
    struct template_info tpl;
    struct sbx_err err = {0};
    if (template_resolve(p->cfg->template_cache, e->spec.name, &tpl, &err) < 0) {
        if (now >= e->retry_at)
            log_warn("warm pool %s: %s", e->spec.name, err.msg);
        e->retry_at = now + POOL_BACKOFF_MAX_MS;
        return;
    }
    /* A template whose warm snapshot is being taken boots no member cold meanwhile: its
     * members are restored from the snapshot, so that their creates answer restored: true
     * (docs/templates.md); one booted cold before it was ready gives way. */
    const char *snap = warm_images_state(p->images, e->spec.name);
    struct census c = {.name = e->spec.name, .digest = tpl.digest, .warm = !strcmp(snap, "ready")};
    manager_each(p->mgr, "", count_member, &c);
    template_info_clear(&tpl);
    if (c.stale) {
        destroy_member(p, c.stale, "its template was rebuilt or is warm now");
        return;
    }
    if (!strcmp(snap, "warming"))
        return;
    if (p->yielding || c.ready > e->spec.size) {
        if (c.idle)
            destroy_member(p, c.idle, p->yielding ? "memory is short" : "pool shrank");
        return;
    }
    /* One boot at a time per template: the host's cores belong to users first. */
    if (c.starting || c.ready >= e->spec.size || now < e->retry_at)
        return;
    struct sandbox *sb;
    if (manager_create_pooled(p->mgr, e->spec.name, on_member_ready, p, &sb, &err) < 0) {
        if (strcmp(err.code, "sandbox_capacity"))
            log_warn("warm pool %s: %s", e->spec.name, err.msg);
        e->retry_at = now + POOL_TICK_MS;
    }
}

static void on_tick(struct loop *l, void *data)
{
    struct warm_pool *p = data;
    p->tick = NULL;
    long long avail = mem_available_mb();
    bool short_now = avail >= 0 && avail < p->cfg->warm_pool_min_free_mb;
    if (short_now != p->yielding)
        log_info("warm pool: %s (%lld MiB available)",
                 short_now ? "memory is short, yielding" : "memory is back, refilling", avail);
    p->yielding = short_now;
    struct sandbox *orphan = NULL;
    void *args[2] = {p, &orphan};
    manager_each(p->mgr, "", count_orphan, args);
    if (orphan)
        destroy_member(p, orphan, "no pool wants its template");
    long long now = sbx_now_ms();
    for (size_t i = 0; i < p->n; i++)
        fill_one(p, &p->e[i], now);
    if (p->n || orphan)
        schedule(p, orphan ? 0 : POOL_TICK_MS);
}

static void schedule(struct warm_pool *p, long long ms)
{
    if (p->tick)
        loop_timer_cancel(p->loop, p->tick);
    p->tick = loop_timer_add(p->loop, ms, on_tick, p);
}

static struct sandbox *pool_take(void *data, const char *template_name, const char *digest)
{
    struct warm_pool *p = data;
    struct pool_entry *e = entry_of(p, template_name);
    if (!e)
        return NULL;
    struct census c = {.name = template_name, .digest = digest};
    manager_each(p->mgr, "", count_member, &c);
    if (!c.idle)
        return NULL;
    e->taken++;
    /* Not at once: the boot's synchronous part (workspace image, shim) would run before the
     * take's own answer, which is due on the next loop turn. */
    schedule(p, POOL_REFILL_DELAY_MS);
    return c.idle;
}

static bool pool_yield(void *data)
{
    struct warm_pool *p = data;
    struct census c = {0};
    for (size_t i = 0; i < p->n && !c.idle; i++) {
        c.name = p->e[i].spec.name;
        manager_each(p->mgr, "", count_member, &c);
    }
    if (!c.idle)
        return false;
    destroy_member(p, c.idle, "a user's create needs the capacity");
    return true;
}

static const char *pool_image(void *data, const char *template_name, const char *digest,
                              char boot_id[33])
{
    struct warm_pool *p = data;
    return warm_images_find(p->images, template_name, digest, boot_id);
}

static const struct sandbox_pool_ops pool_ops = {
    .take = pool_take,
    .yield = pool_yield,
    .image = pool_image,
};

/* /metrics: each pool's ready sandboxes and the size it keeps (docs/operations.md). */
static void pool_gauges(FILE *out, void *data)
{
    struct warm_pool *p = data;
    static const char *const help[2][2] = {
        {"sbx_warm_pool_ready", "Warm pool sandboxes booted and waiting, by template"},
        {"sbx_warm_pool_size", "Warm pool sandboxes wanted (SBX_WARM_POOL), by template"},
    };
    for (int g = 0; g < 2; g++) {
        fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", help[g][0], help[g][1], help[g][0]);
        for (size_t i = 0; i < p->n; i++) {
            struct pool_state st;
            char label[METRICS_LABELS_MAX];
            warm_pool_state(p, p->e[i].spec.name, &st);
            metrics_label(label, sizeof(label), "template", p->e[i].spec.name);
            fprintf(out, "%s{%s} %d\n", help[g][0], label, g ? st.size : st.ready);
        }
    }
}

int warm_pool_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                  struct warm_pool **out, struct sbx_err *err)
{
    struct warm_pool *p = sbx_xcalloc(1, sizeof(*p));
    p->cfg = cfg;
    p->loop = l;
    p->mgr = m;
    struct pool_spec spec[POOL_TEMPLATES_MAX];
    int r = cfg->warm_pool ? pool_spec_parse(cfg->warm_pool, spec, &p->n, err) : 0;
    if (r < 0) {
        free(p);
        return r;
    }
    for (size_t i = 0; i < p->n; i++)
        p->e[i].spec = spec[i];
    manager_set_pool(m, &pool_ops, p);
    if ((r = warm_images_new(cfg, l, m, &p->images, err)) < 0) {
        manager_set_pool(m, NULL, NULL);
        free(p);
        return r;
    }
    schedule(p, 0);
    metrics_gauges_add(pool_gauges, p);
    for (size_t i = 0; i < p->n; i++)
        log_info("warm pool %s: %d sandboxes", spec[i].name, spec[i].size);
    *out = p;
    return 0;
}

void warm_pool_free(struct warm_pool *p)
{
    if (!p)
        return;
    if (p->tick)
        loop_timer_cancel(p->loop, p->tick);
    metrics_gauges_remove(pool_gauges, p);
    manager_set_pool(p->mgr, NULL, NULL);
    warm_images_free(p->images);
    free(p);
}

void warm_pool_state(struct warm_pool *p, const char *template_name, struct pool_state *out)
{
    memset(out, 0, sizeof(*out));
    out->yielding = p->yielding;
    struct pool_entry *e = entry_of(p, template_name);
    if (!e)
        return;
    struct census c = {.name = template_name};
    manager_each(p->mgr, "", count_member, &c);
    out->size = e->spec.size;
    out->ready = c.ready;
    out->starting = c.starting;
    out->taken = e->taken;
}

const char *warm_pool_snapshot_state(struct warm_pool *p, const char *template_name)
{
    return warm_images_state(p->images, template_name);
}
