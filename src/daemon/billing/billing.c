/* Import circle with meter.c (allowed inside a folder, docs/architecture.md#layering):
 * billing.c owns the state and runs the meter (meter.c: billing_run, billing_meter_running),
 * and meter.c takes the constants and types of billing.h that billing.c also serves to
 * the other features. Both are the billing folder's; nothing outside sees the loop. */
#include "billing.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../auth/auth.h"
#include "../config.h"
#include "../http/server.h"
#include "../store/store.h"
#include "../store/usage.h"
#include "billing_internal.h"
#include "metrics.h"

/* The daemon's one billing: the features that meter reach it without a handle. */
static struct billing *current;

long long billing_now_ms(void)
{
    const char *f = current ? current->cfg->test_clock_file : NULL;
    if (!f)
        return sbx_wall_ms();
    char buf[32] = "";
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    char *end;
    long long s = n > 0 ? strtoll(buf, &end, 10) : 0;
    return s > 0 ? s * 1000 : sbx_wall_ms();
}

static void on_tick(struct loop *l, void *data)
{
    struct billing *b = data;
    b->tick = NULL;
    billing_run(b, billing_now_ms());
    b->tick = loop_timer_add(b->loop, b->cfg->billing_tick_ms, on_tick, b);
}

static void on_store_statement(long long ns, void *data)
{
    metrics_observe(M_STORE_DURATION, "", (double)ns / 1e9);
}

int billing_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct billing **out, struct sbx_err *err)
{
    struct billing *b = sbx_xcalloc(1, sizeof(*b));
    b->cfg = cfg;
    b->loop = l;
    b->store = st;
    current = b;
    store_set_profile(st, on_store_statement, NULL);
    /* Whatever was due while the daemon was down is settled before the first request. */
    billing_run(b, billing_now_ms());
    b->tick = loop_timer_add(l, cfg->billing_tick_ms, on_tick, b);
    *out = b;
    return 0;
}

void billing_free(struct billing *b)
{
    if (!b)
        return;
    if (b->tick)
        loop_timer_cancel(b->loop, b->tick);
    store_set_profile(b->store, NULL, NULL);
    if (current == b)
        current = NULL;
    free(b->inflight);
    free(b);
}

void billing_sandbox_state(const struct store_sandbox *rec, const char *to)
{
    struct billing *b = current;
    if (!b || strcmp(rec->backend, "v2"))
        return;
    long long now = billing_now_ms();
    if (!strcmp(rec->status, SANDBOX_RUNNING))
        billing_meter_running(b, rec, now);
    /* Whatever it becomes, what it did before now is accounted for. */
    (void)store_usage_mark_set(b->store, rec->id, USAGE_V2_RUNNING_MS, now, NULL);
}

void billing_tick_now(void)
{
    if (current)
        billing_run(current, billing_now_ms());
}

long long billing_unpaid(const char *user)
{
    long long bal = 0;
    if (!current || store_wallet_balance(current->store, user, &bal, NULL) < 0)
        return 0;
    return bal < 0 ? -bal : 0;
}

/* Exec ms today: finished (the store) and still running (in memory). */
static int used_today(struct billing *b, const char *user, long long now, long long *out,
                      struct sbx_err *err)
{
    long long day = now - now % BILLING_DAY_MS;
    int r = store_usage_sum(b->store, user, NULL, USAGE_EXEC_MS, NULL, day, day + BILLING_DAY_MS,
                            out, err);
    if (r < 0)
        return r;
    long long mono = sbx_now_ms();
    for (size_t i = 0; i < b->ninflight; i++)
        if (!strcmp(b->inflight[i].user, user))
            *out += mono - b->inflight[i].started_mono;
    return 0;
}

int billing_admit(const char *user, struct sbx_err *err)
{
    struct billing *b = current;
    if (!b)
        return 0;
    long long bal;
    int r = store_wallet_balance(b->store, user, &bal, err);
    if (r < 0)
        return r;
    if (bal < 0)
        return sbx_err_set(err, EPERM, "insufficient_balance",
                           "%lld micro-EUR of usage is unpaid: top up the wallet to go on", -bal);
    if (b->ninflight >= BILLING_INFLIGHT_MAX)
        return sbx_err_set(err, EAGAIN, "sandbox_daily_limit", "too many execs running at once");
    long long used;
    if (b->cfg->daily_exec_s > 0 && ((r = used_today(b, user, billing_now_ms(), &used, err)) < 0 ||
                                     used >= b->cfg->daily_exec_s * 1000))
        return r < 0 ? r
                     : sbx_err_set(err, EAGAIN, "sandbox_daily_limit",
                                   "the daily limit of %lld exec seconds is used up; it resets "
                                   "at 00:00 UTC",
                                   b->cfg->daily_exec_s);
    return 0;
}

void billing_exec_begin(const char *user, const char *key_id, const char *sandbox_id,
                        const char *backend, struct billing_exec *x)
{
    struct billing *b = current;
    x->token = 0;
    if (!b)
        return;
    b->inflight = sbx_xrealloc(b->inflight, (b->ninflight + 1) * sizeof(*b->inflight));
    struct billing_inflight *f = &b->inflight[b->ninflight++];
    memset(f, 0, sizeof(*f));
    f->token = ++b->last_token;
    f->started_mono = sbx_now_ms();
    snprintf(f->user, sizeof(f->user), "%s", user);
    snprintf(f->key_id, sizeof(f->key_id), "%s", key_id ? key_id : "");
    snprintf(f->sandbox_id, sizeof(f->sandbox_id), "%s", sandbox_id ? sandbox_id : "");
    snprintf(f->backend, sizeof(f->backend), "%s", backend ? backend : "");
    x->token = f->token;
}

/* The in-flight entry of x, or NULL. */
static struct billing_inflight *inflight_of(struct billing *b, const struct billing_exec *x)
{
    for (size_t i = 0; b && x->token && i < b->ninflight; i++)
        if (b->inflight[i].token == x->token)
            return &b->inflight[i];
    return NULL;
}

void billing_exec_drop(struct billing_exec *x)
{
    struct billing *b = current;
    struct billing_inflight *f = inflight_of(b, x);
    if (f)
        *f = b->inflight[--b->ninflight];
    x->token = 0;
}

void billing_meter_exec(struct billing_exec *x)
{
    struct billing *b = current;
    struct billing_inflight *f = inflight_of(b, x);
    if (f) {
        long long ms = sbx_now_ms() - f->started_mono;
        struct store_usage_event e = {.ts_ms = billing_now_ms(),
                                      .user = f->user,
                                      .key_id = f->key_id,
                                      .sandbox_id = f->sandbox_id,
                                      .backend = f->backend,
                                      .kind = USAGE_EXEC_MS,
                                      .amount = ms};
        /* The row lands before the exec stops counting as running, so the daily limit
         * never sees it twice nor not at all. A failed write loses this exec's time. */
        (void)store_usage_add(b->store, &e, NULL);
        char labels[64];
        metrics_label(labels, sizeof(labels), "backend", f->backend);
        metrics_add(M_EXEC_SECONDS, labels, (double)ms / 1000.0);
        metrics_add(M_EXECS, labels, 1);
        *f = b->inflight[--b->ninflight];
    }
    x->token = 0;
}

void billing_headers(struct http_req *req)
{
    if (!current)
        return;
    http_req_add_header(req, "x-sbx-data-region", current->cfg->data_region);
    const char *p = http_req_path(req);
    if (!strncmp(p, "/v1/sandboxes", 13) && (p[13] == '\0' || p[13] == '/'))
        http_req_add_header(req, "x-sbx-cost-micro-usd", "0");
}

void billing_on_error(const char *code, const struct auth_identity *who, json_t *error)
{
    metrics_error(code);
    if (strcmp(code, "insufficient_balance") || !who || !who->authenticated)
        return;
    json_object_set_new(error, "unpaid_micro_eur", json_integer(billing_unpaid(who->user)));
}

static void hook_request(void *data, struct http_req *req)
{
    (void)data;
    billing_headers(req);
}

static void hook_error(void *data, const char *code, const struct auth_identity *who,
                       json_t *error)
{
    (void)data;
    billing_on_error(code, who, error);
}

static void hook_done(void *data, const char *method, const char *path, unsigned status,
                      long long ms)
{
    (void)data;
    metrics_http_done(method, path, status, ms);
}

const struct http_server_hooks *billing_http_hooks(void)
{
    static const struct http_server_hooks hooks = {
        .on_request = hook_request, .on_error = hook_error, .on_done = hook_done};
    return &hooks;
}
