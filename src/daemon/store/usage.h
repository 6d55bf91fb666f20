/* Metering and money: usage events (exec time, v2 running time, paused snapshot bytes),
 * per-sandbox metering marks, wallets with their append-only ledger, and the
 * settlement watermark (docs/billing.md). Amounts of money are micro-EUR. */
#ifndef SBX_STORE_USAGE_H
#define SBX_STORE_USAGE_H

#include <stdbool.h>

#include "../../common/err.h"

struct store;

/* What a usage event counts. */
#define USAGE_EXEC_MS "exec_ms"                         /* wall time of execs, cells, tools */
#define USAGE_V2_RUNNING_MS "v2_running_ms"             /* a v2 sandbox existing, busy or idle */
#define USAGE_SNAPSHOT_BYTE_HOURS "snapshot_byte_hours" /* a paused snapshot, sampled hourly */
#define USAGE_VOLUME_BYTE_HOURS "volume_byte_hours"     /* a volume's used bytes, hourly */

struct store_usage_event {
    long long ts_ms; /* the time the usage belongs to (settlement interval, day, month) */
    const char *user;
    const char *key_id;
    const char *sandbox_id; /* may be NULL */
    const char *backend;    /* the sandbox's, "v1" or "v2" */
    const char *kind;       /* USAGE_* */
    long long amount;
};

int store_usage_add(struct store *s, const struct store_usage_event *e, struct sbx_err *err);
/* Sum of kind over [from_ms, to_ms); user, key_id and backend NULL: any. */
int store_usage_sum(struct store *s, const char *user, const char *key_id, const char *kind,
                    const char *backend, long long from_ms, long long to_ms, long long *out,
                    struct sbx_err *err);
/* Per (user, key, kind) sums over [from_ms, to_ms); user NULL: everyone. */
typedef void (*store_usage_cb)(const char *user, const char *key_id, const char *kind,
                               long long amount, void *data);
int store_usage_report(struct store *s, const char *user, long long from_ms, long long to_ms,
                       store_usage_cb cb, void *data, struct sbx_err *err);
/* Users with any usage in [from_ms, to_ms). */
typedef void (*store_user_cb)(const char *user, void *data);
int store_usage_users(struct store *s, long long from_ms, long long to_ms, store_user_cb cb,
                      void *data, struct sbx_err *err);

/* How far a sandbox's running time (or snapshot hours) has been metered; 0 when never. */
int store_usage_mark_get(struct store *s, const char *sandbox_id, const char *kind,
                         long long *upto_ms, struct sbx_err *err);
int store_usage_mark_set(struct store *s, const char *sandbox_id, const char *kind,
                         long long upto_ms, struct sbx_err *err);

/* --- wallets and the ledger ------------------------------------------------------- */

#define LEDGER_SANDBOX_CHARGE "sandbox_charge"
#define LEDGER_TOP_UP "top_up"
#define LEDGER_ADJUSTMENT "adjustment"
#define STORE_LEDGER_DETAILS_MAX 1024

struct store_ledger_entry {
    long long id;
    const char *user;
    long long ts_ms;
    const char *source;                           /* LEDGER_* */
    long long amount;                             /* signed: a charge is negative */
    long long interval_start_ms, interval_end_ms; /* a charge's; 0 for others */
    long long balance_after;
    const char *details; /* JSON object text or NULL */
};

/* The balance (0 for a user with no wallet yet). */
int store_wallet_balance(struct store *s, const char *user, long long *out, struct sbx_err *err);
/* Append e (id and balance_after are filled) and move the balance by e->amount, together. */
int store_wallet_post(struct store *s, struct store_ledger_entry *e, struct sbx_err *err);
typedef void (*store_ledger_cb)(const struct store_ledger_entry *e, void *data);
/* Newest first; before_id 0: from the newest. */
int store_ledger_query(struct store *s, const char *user, long long before_id, int limit,
                       store_ledger_cb cb, void *data, struct sbx_err *err);

/* Named integers the billing keeps (the settlement watermark). -ENOENT when unset. */
int store_billing_get(struct store *s, const char *name, long long *out, struct sbx_err *err);
int store_billing_set(struct store *s, const char *name, long long value, struct sbx_err *err);

/* A unit of work that lands whole or not at all (nests: savepoints). */
int store_tx_begin(struct store *s, struct sbx_err *err);
/* The same, holding the store-wide write lock (read-then-write across nodes). */
int store_tx_begin_locked(struct store *s, struct sbx_err *err);
int store_tx_end(struct store *s, bool commit, struct sbx_err *err);

/* Sandboxes that are not ended, counted by status and backend (metrics). */
typedef void (*store_count_cb)(const char *status, const char *backend, long long n, void *data);
int store_sandbox_count_by_state(struct store *s, store_count_cb cb, void *data,
                                 struct sbx_err *err);

/* Every statement's run time, for the store latency metric. fn NULL: off. */
typedef void (*store_profile_fn)(long long ns, void *data);
void store_set_profile(struct store *s, store_profile_fn fn, void *data);

#endif
