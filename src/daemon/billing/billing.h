/* Metering, the daily exec limit, the wallet check and settlement (docs/billing.md).
 *
 * One billing per daemon, reachable from the features it meters without a handle: exec,
 * kernel cells and background processes (exec/procmeter.c: our /processes and E2B's
 * process.Start) call billing_admit before they start,
 * billing_exec_begin once started and billing_meter_exec when they end; sandbox creation
 * calls billing_admit, and the sandbox life cycle billing_sandbox_state. Without a billing
 * (unit tests) these admit everything and meter nothing. */
#ifndef SBX_BILLING_H
#define SBX_BILLING_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/loop.h"

struct sbxd_config;
struct store;
struct billing;
struct auth_identity;

/* Execs counted at once as running; past it new ones get 429 sandbox_daily_limit. */
#define BILLING_INFLIGHT_MAX 4096
/* Settlement intervals worked through in one tick (a test clock may jump far). */
#define BILLING_SETTLE_PER_TICK 5000
#define BILLING_HOUR_MS 3600000LL
#define BILLING_DAY_MS 86400000LL

int billing_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct billing **out, struct sbx_err *err);
void billing_free(struct billing *b);

/* Billing's clock in unix ms: the wall clock, or SBX_TEST_CLOCK_FILE's seconds. */
long long billing_now_ms(void);

/* A metered exec between billing_exec_begin and billing_meter_exec; zero: not counted. */
struct billing_exec {
    long long token;
};

/* May user start something that runs code (a create, an exec, a cell)? 402
 * insufficient_balance while an interval is unpaid, 429 sandbox_daily_limit once today's
 * exec seconds (finished and still running) reach the limit. */
int billing_admit(const char *user, struct sbx_err *err);
/* An admitted exec started: it counts as running for the daily limit until
 * billing_meter_exec. Call it in the same loop turn as billing_admit, so that parallel
 * requests each see the others. */
void billing_exec_begin(const char *user, const char *key_id, const char *sandbox_id,
                        const char *backend, struct billing_exec *x);
/* The exec ended: its wall time becomes a usage event. Harmless on a zero x. */
void billing_meter_exec(struct billing_exec *x);
/* It never started after all (the agent refused a background process): it stops counting
 * as running and nothing is metered. Harmless on a zero x. */
void billing_exec_drop(struct billing_exec *x);

/* A sandbox goes from rec->status to `to` (running, paused, destroyed, failed): its v2
 * running time is metered up to this moment, so pauses and ends are exact. */
struct store_sandbox;
void billing_sandbox_state(const struct store_sandbox *rec, const char *to);

/* Run metering and settlement up to now (the tick does it on its own; routes call it so
 * an answer reflects the clock). */
void billing_tick_now(void);

/* Money owed by user (a negative balance), 0 when none. */
long long billing_unpaid(const char *user);

/* The response headers every answer carries (x-sbx-data-region) and metered ones
 * (x-sbx-cost-micro-usd: the cost is settled later from the wallet). */
struct http_req;
void billing_headers(struct http_req *req);
/* An error answer is being sent: count it (metrics) and add billing's fields to its
 * error object (unpaid_micro_eur for a 402). */
void billing_on_error(const char *code, const struct auth_identity *who, json_t *error);
/* The HTTP server's hooks (http_server_set_hooks) that do the two above and count each
 * request (metrics_http_done): main installs them on every listener. */
struct http_server_hooks;
const struct http_server_hooks *billing_http_hooks(void);

#include "price.h" /* billing_cost, billing_month_start */

#endif
