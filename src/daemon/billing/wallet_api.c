/* GET /v1/wallet, GET /v1/wallet/ledger, POST /v1/wallet/top-up (admin) and GET /v1/usage:
 * a member sees their own, an admin anyone's with ?user= (docs/billing.md). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../auth/auth.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "../store/usage.h"
#include "billing.h"

#define LEDGER_PAGE_DEFAULT 100
#define LEDGER_PAGE_MAX 1000
#define TOP_UP_MAX 1000000000000LL /* one million EUR in micro-EUR */
#define USAGE_RANGE_MAX_DAYS 366

/* The user a request is about: ?user= for an admin, else the caller. */
static int subject(struct http_req *req, const char **user, struct sbx_err *err)
{
    const struct auth_identity *who = http_req_identity(req);
    const char *u = http_req_query(req, "user");
    if (u && strcmp(u, who->user) && who->role != AUTH_ROLE_ADMIN)
        return sbx_err_set(err, EPERM, "admin_required", "only admins can see other users");
    if (u && (!*u || strlen(u) > AUTH_USER_MAX))
        return sbx_err_set(err, EINVAL, "invalid_request", "user must be 1-%d characters",
                           AUTH_USER_MAX);
    *user = u ? u : who->user;
    return 0;
}

static json_t *wallet_json(struct sbxd *d, const char *user, struct sbx_err *err, int *r)
{
    long long bal, settled = 0;
    if ((*r = store_wallet_balance(d->store, user, &bal, err)) < 0)
        return NULL;
    (void)store_billing_get(d->store, "settled_until_ms", &settled, NULL);
    return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I}", "object", "wallet", "user", user, "currency",
                     "EUR", "balance_micro_eur", (json_int_t)bal, "unpaid_micro_eur",
                     (json_int_t)(bal < 0 ? -bal : 0), "settled_until_ms", (json_int_t)settled);
}

static void api_wallet_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *user;
    int r = subject(req, &user, &err);
    json_t *o = NULL;
    if (r == 0) {
        billing_tick_now();
        o = wallet_json(d, user, &err, &r);
    }
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, o);
}

static json_t *entry_json(const struct store_ledger_entry *e)
{
    json_t *details = e->details ? json_loads(e->details, 0, NULL) : NULL;
    json_t *o =
        json_pack("{s:s,s:I,s:s,s:I,s:s,s:I,s:I,s:o?}", "object", "ledger_entry", "id",
                  (json_int_t)e->id, "user", e->user, "ts_ms", (json_int_t)e->ts_ms, "source",
                  e->source, "amount_micro_eur", (json_int_t)e->amount, "balance_after_micro_eur",
                  (json_int_t)e->balance_after, "details", details);
    if (e->interval_end_ms)
        json_object_set_new(o, "interval",
                            json_pack("{s:I,s:I}", "start_ms", (json_int_t)e->interval_start_ms,
                                      "end_ms", (json_int_t)e->interval_end_ms));
    return o;
}

static void add_entry(const struct store_ledger_entry *e, void *data)
{
    json_array_append_new(data, entry_json(e));
}

static void api_ledger(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *user;
    long long limit = LEDGER_PAGE_DEFAULT, before = 0;
    json_t *data = json_array();
    /* One more than asked says whether there is another page. */
    if (subject(req, &user, &err) < 0 ||
        http_req_query_int(req, "limit", 1, LEDGER_PAGE_MAX, "invalid_request", &limit, &err) < 0 ||
        http_req_query_int(req, "before", 1, (1LL << 62), "invalid_cursor", &before, &err) < 0 ||
        (billing_tick_now(),
         store_ledger_query(d->store, user, before, (int)limit + 1, add_entry, data, &err)) < 0) {
        json_decref(data);
        http_respond_error(req, &err);
        return;
    }
    bool more = json_array_size(data) > (size_t)limit;
    if (more)
        json_array_remove(data, (size_t)limit);
    json_t *o = json_pack("{s:s,s:s,s:o,s:b}", "object", "list", "user", user, "data", data,
                          "has_more", more);
    if (more)
        json_object_set(o, "next_before",
                        json_object_get(json_array_get(data, (size_t)limit - 1), "id"));
    http_respond_json(req, 200, o);
}

static int top_up_parse(json_t *body, const char **user, const char **source, long long *amount,
                        struct sbx_err *err)
{
    json_t *u = json_object_get(body, "user"), *a = json_object_get(body, "amount_micro_eur"),
           *s = json_object_get(body, "source");
    if (!json_is_string(u) || !json_string_length(u) || json_string_length(u) > AUTH_USER_MAX)
        return sbx_err_set(err, EINVAL, "invalid_top_up", "user must be 1-%d characters",
                           AUTH_USER_MAX);
    *source = LEDGER_TOP_UP;
    if (s && !json_is_null(s)) {
        const char *v = json_string_value(s);
        if (!v || (strcmp(v, LEDGER_TOP_UP) && strcmp(v, LEDGER_ADJUSTMENT)))
            return sbx_err_set(err, EINVAL, "invalid_top_up",
                               "source must be \"top_up\" or \"adjustment\"");
        *source = v;
    }
    bool adjust = !strcmp(*source, LEDGER_ADJUSTMENT);
    /* A top-up adds money; an adjustment corrects either way. */
    if (!json_is_integer(a) || json_integer_value(a) > TOP_UP_MAX ||
        json_integer_value(a) < (adjust ? -TOP_UP_MAX : 1) || json_integer_value(a) == 0)
        return sbx_err_set(err, EINVAL, "invalid_top_up",
                           "amount_micro_eur must be an integer %s up to %lld",
                           adjust ? "other than 0, negative or positive," : "from 1", TOP_UP_MAX);
    *user = json_string_value(u);
    *amount = json_integer_value(a);
    return 0;
}

static void api_top_up(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    const char *user = NULL, *source = NULL;
    long long amount = 0;
    if (http_req_json(req, &body, &err) < 0 ||
        top_up_parse(body, &user, &source, &amount, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_t *note = json_object_get(body, "note");
    json_t *details = json_is_string(note) && json_string_length(note) <= 200
                          ? json_pack("{s:O}", "note", note)
                          : NULL;
    _cleanup_free_ char *dtext = details ? json_dumps(details, JSON_COMPACT) : NULL;
    struct store_ledger_entry e = {.user = user,
                                   .ts_ms = billing_now_ms(),
                                   .source = source,
                                   .amount = amount,
                                   .details = dtext};
    int r;
    json_t *wallet = NULL;
    if ((r = store_wallet_post(d->store, &e, &err)) == 0)
        wallet = wallet_json(d, user, &err, &r);
    if (r < 0) {
        json_decref(details);
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), user, http_req_id(req), "wallet.top_up", NULL,
                 "ok",
                 json_pack("{s:s,s:I,s:I}", "source", source, "amount_micro_eur",
                           (json_int_t)amount, "ledger_id", (json_int_t)e.id));
    json_decref(details);
    json_object_set_new(wallet, "entry", entry_json(&e));
    json_decref(body);
    http_respond_json(req, 200, wallet);
}

/* ?name=YYYY-MM-DD as the first ms of that UTC day; absent leaves *out. */
static int query_date(struct http_req *req, const char *name, long long *out, struct sbx_err *err)
{
    const char *v = http_req_query(req, name);
    if (!v)
        return 0;
    struct tm tm = {0};
    const char *end = strptime(v, "%Y-%m-%d", &tm);
    if (!end || *end || strlen(v) != 10)
        return sbx_err_set(err, EINVAL, "invalid_usage_query", "%s must be a date YYYY-MM-DD",
                           name);
    *out = (long long)timegm(&tm) * 1000;
    return 0;
}

struct usage_acc {
    json_t *keys;  /* key_id -> {kind: amount} */
    json_t *total; /* kind -> amount */
};

static void add_usage(const char *user, const char *key_id, const char *kind, long long amount,
                      void *data)
{
    struct usage_acc *a = data;
    json_t *k = json_object_get(a->keys, key_id);
    if (!k) {
        k = json_pack("{s:s,s:I,s:I,s:I}", "key_id", key_id, USAGE_EXEC_MS, (json_int_t)0,
                      USAGE_V2_RUNNING_MS, (json_int_t)0, USAGE_SNAPSHOT_BYTE_HOURS, (json_int_t)0);
        json_object_set_new(a->keys, key_id, k);
    }
    json_object_set_new(k, kind,
                        json_integer(json_integer_value(json_object_get(k, kind)) + amount));
    json_object_set_new(a->total, kind,
                        json_integer(json_integer_value(json_object_get(a->total, kind)) + amount));
}

static void format_day(long long ms, char out[11])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 11, "%Y-%m-%d", &tm);
}

static void api_usage(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *user;
    long long now = billing_now_ms();
    long long today = now - now % BILLING_DAY_MS;
    long long from = billing_month_start(now), to = today;
    int r;
    if ((r = subject(req, &user, &err)) < 0 || (r = query_date(req, "from", &from, &err)) < 0 ||
        (r = query_date(req, "to", &to, &err)) < 0)
        goto fail;
    /* "to" names the last day counted. */
    to += BILLING_DAY_MS;
    if (to <= from || to - from > USAGE_RANGE_MAX_DAYS * BILLING_DAY_MS) {
        r = sbx_err_set(&err, EINVAL, "invalid_usage_query",
                        "from must not be after to, and the range is at most %d days",
                        USAGE_RANGE_MAX_DAYS);
        goto fail;
    }
    billing_tick_now();
    struct usage_acc a = {.keys = json_object(),
                          .total = json_pack("{s:I,s:I,s:I}", USAGE_EXEC_MS, (json_int_t)0,
                                             USAGE_V2_RUNNING_MS, (json_int_t)0,
                                             USAGE_SNAPSHOT_BYTE_HOURS, (json_int_t)0)};
    long long day_ms = 0;
    if ((r = store_usage_report(d->store, user, from, to, add_usage, &a, &err)) < 0 ||
        (r = store_usage_sum(d->store, user, NULL, USAGE_EXEC_MS, NULL, today,
                             today + BILLING_DAY_MS, &day_ms, &err)) < 0) {
        json_decref(a.keys);
        json_decref(a.total);
        goto fail;
    }
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(a.keys, k, v) json_array_append(keys, v);
    json_decref(a.keys);
    char f[11], t[11], td[11];
    format_day(from, f);
    format_day(to - BILLING_DAY_MS, t);
    format_day(today, td);
    long long limit = d->cfg.daily_exec_s;
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:{s:s,s:I,s:I,s:o?}}", "object", "usage", "user", user,
                  "from", f, "to", t, "total", a.total, "keys", keys, "today", "date", td,
                  "exec_ms", (json_int_t)day_ms, "exec_seconds", (json_int_t)(day_ms / 1000),
                  "daily_limit_seconds", limit ? json_integer(limit) : NULL);
    http_respond_json(req, 200, o);
    return;
fail:
    http_respond_error(req, &err);
}

static const struct route routes[] = {
    {"GET", "/v1/wallet", AUTH_KEY, api_wallet_get, 0},
    {"GET", "/v1/wallet/ledger", AUTH_KEY, api_ledger, 0},
    {"POST", "/v1/wallet/top-up", AUTH_ADMIN, api_top_up, 0},
    {"GET", "/v1/usage", AUTH_KEY, api_usage, 0},
};
const struct route_table wallet_routes = ROUTE_TABLE(routes);
