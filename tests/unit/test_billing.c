/* Unit tests for billing/ and store/usage.c: the cost arithmetic, month starts, the store's
 * usage sums, wallet moves and the append-only ledger, and the metrics page. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/daemon/billing/billing.h"
#include "../../src/daemon/billing/metrics.h"
#include "../../src/daemon/store/store.h"
#include "../../src/daemon/store/usage.h"
#include "check.h"

static void test_cost(void)
{
    const long long hour = BILLING_HOUR_MS, price = 100000; /* 0.10 EUR an hour */
    CHECK_EQ_INT(billing_cost(0, 0, price, hour), 0, "nothing used costs nothing");
    CHECK_EQ_INT(billing_cost(hour, 0, price, hour), price, "an hour costs the hourly price");
    CHECK_EQ_INT(billing_cost(10 * hour, 10 * hour, price, hour), 0, "the free hours are free");
    CHECK_EQ_INT(billing_cost(11 * hour, 10 * hour, price, hour), price,
                 "the eleventh hour is paid");
    /* Charges are differences of cumulative costs: many small intervals add up exactly. */
    long long sum = 0, used = 0;
    for (int i = 0; i < 1000; i++) {
        long long before = used;
        used += 1234;
        sum += billing_cost(used, 0, price, hour) - billing_cost(before, 0, price, hour);
    }
    CHECK_EQ_INT(sum, billing_cost(used, 0, price, hour), "rounding never drifts");
    /* Byte-hours of a 2 GB snapshot for a 730-hour month at 0.05 EUR per GB-month. */
    long long bh = 2000000000LL * 730;
    CHECK_EQ_INT(billing_cost(bh, 0, 50000, 1000000000LL * 730), 100000,
                 "2 GB for a month cost 0.10 EUR");
    CHECK_EQ_INT(billing_cost(1LL << 40, 0, 1000000000000LL, hour), 305419896604444444LL,
                 "a product past 64 bits is still exact");
}

static void test_month_start(void)
{
    /* 2026-11-01T00:00:00Z = 1793491200 */
    CHECK_EQ_INT(billing_month_start(1793491200LL * 1000), 1793491200LL * 1000,
                 "a month's first ms is its own start");
    CHECK_EQ_INT(billing_month_start(1793491200LL * 1000 - 1), 1790812800LL * 1000,
                 "the ms before is October's");
    CHECK_EQ_INT(billing_month_start(1793491200LL * 1000 + 15LL * 86400000), 1793491200LL * 1000,
                 "mid-November is November's");
}

static void test_store_usage(void)
{
    char dir[] = "/tmp/sbx-billing-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    _cleanup_free_ char *path = sbx_xasprintf("%s/db", dir);
    struct store *s = NULL;
    struct sbx_err err = {0};
    CHECK(store_open(path, &s, &err) == 0, "the store opens: %.100s", err.msg);
    struct store_usage_event e = {.ts_ms = 1000,
                                  .user = "u",
                                  .key_id = "k1",
                                  .sandbox_id = "sb",
                                  .backend = "v1",
                                  .kind = USAGE_EXEC_MS,
                                  .amount = 250};
    CHECK(store_usage_add(s, &e, &err) == 0, "an event is added");
    e.ts_ms = 2000;
    e.key_id = "k2";
    e.backend = "v2";
    CHECK(store_usage_add(s, &e, &err) == 0, "another");
    long long n = -1;
    CHECK(store_usage_sum(s, "u", NULL, USAGE_EXEC_MS, NULL, 0, 3000, &n, &err) == 0 && n == 500,
          "the user's sum: %lld", n);
    CHECK(store_usage_sum(s, "u", "k2", USAGE_EXEC_MS, NULL, 0, 3000, &n, &err) == 0 && n == 250,
          "one key's sum");
    CHECK(store_usage_sum(s, "u", NULL, USAGE_EXEC_MS, "v1", 0, 3000, &n, &err) == 0 && n == 250,
          "one backend's sum");
    CHECK(store_usage_sum(s, "u", NULL, USAGE_EXEC_MS, NULL, 1001, 2000, &n, &err) == 0 && n == 0,
          "the range is [from, to)");
    CHECK(store_usage_sum(s, "nobody", NULL, USAGE_EXEC_MS, NULL, 0, 3000, &n, &err) == 0 && n == 0,
          "an unknown user used nothing");

    long long bal = 1;
    CHECK(store_wallet_balance(s, "u", &bal, &err) == 0 && bal == 0, "no wallet: balance 0");
    struct store_ledger_entry t = {.user = "u", .ts_ms = 5, .source = LEDGER_TOP_UP, .amount = 70};
    CHECK(store_wallet_post(s, &t, &err) == 0 && t.balance_after == 70 && t.id > 0,
          "a top-up moves the balance");
    struct store_ledger_entry ch = {.user = "u",
                                    .ts_ms = 6,
                                    .source = LEDGER_SANDBOX_CHARGE,
                                    .amount = -100,
                                    .interval_start_ms = 0,
                                    .interval_end_ms = 600000};
    CHECK(store_wallet_post(s, &ch, &err) == 0 && ch.balance_after == -30,
          "a charge may leave the balance negative (unpaid)");
    struct store_ledger_entry bad = {.user = "u", .ts_ms = 7, .source = "gift", .amount = 1};
    CHECK(store_wallet_post(s, &bad, &err) < 0, "an unknown source is refused");
    CHECK(store_wallet_balance(s, "u", &bal, &err) == 0 && bal == -30,
          "a refused entry moved nothing: %lld", bal);
    long long v = 0;
    CHECK(store_billing_get(s, "x", &v, &err) == -2, "an unset state is ENOENT");
    CHECK(store_billing_set(s, "x", 42, &err) == 0 && store_billing_get(s, "x", &v, &err) == 0 &&
              v == 42,
          "the watermark is kept");
    store_free(s);
    _cleanup_free_ char *rm = sbx_xasprintf("rm -rf %s", dir);
    CHECK(system(rm) == 0, "cleanup");
}

static void test_metrics_page(void)
{
    metrics_reset();
    metrics_http_done("POST", "/v1/sandboxes/sb_0123456789abcdef0123/exec", 200, 1500);
    metrics_http_done("GET", "/v1/sandboxes/sb_0123/files/a/b/c.txt", 404, 1);
    metrics_http_done("POST", "/v1/sandboxes/run", 200, 10);
    metrics_error("bad\"code");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    metrics_render(f, NULL, NULL);
    fclose(f);
    CHECK(strstr(text, "sbx_http_requests_total{method=\"POST\",route=\"/v1/sandboxes/{id}/"
                       "exec\",status=\"200\"} 1\n") != NULL,
          "ids fold into {id}");
    CHECK(strstr(text, "route=\"/v1/sandboxes/{id}/files/{path}\"") != NULL,
          "file paths fold into {path}");
    CHECK(strstr(text, "route=\"/v1/sandboxes/run\"") != NULL, "run is not an id");
    CHECK(strstr(text, "sbx_operation_duration_seconds_bucket{op=\"exec\",le=\"2.5\"} 1\n") &&
              strstr(text, "sbx_operation_duration_seconds_bucket{op=\"exec\",le=\"1\"} 0\n"),
          "the exec latency is in its bucket");
    CHECK(strstr(text, "sbx_errors_total{code=\"bad\\\"code\"} 1\n") != NULL,
          "label values are escaped");
    CHECK(strstr(text, "sb_0123") == NULL, "no id in the page");
    free(text);
    for (int i = 0; i < METRICS_SERIES_MAX + 10; i++) {
        char code[32];
        snprintf(code, sizeof(code), "c%d", i);
        metrics_error(code);
    }
    text = NULL;
    f = open_memstream(&text, &len);
    metrics_render(f, NULL, NULL);
    fclose(f);
    CHECK(strstr(text, "sbx_errors_total{other=\"1\"} 11\n") != NULL,
          "past the series bound, label sets share one series");
    free(text);
    metrics_reset();
}

static void put_gauge(FILE *out, void *data)
{
    fprintf(out, "sbx_test_gauge %d\n", *(int *)data);
}

static void test_metrics_sources(void)
{
    int v = 7;
    char *text = NULL;
    size_t len = 0;
    metrics_gauges_add(put_gauge, &v);
    FILE *f = open_memstream(&text, &len);
    metrics_render(f, NULL, NULL);
    fclose(f);
    CHECK(strstr(text, "sbx_test_gauge 7\n") != NULL, "a registered source is written");
    free(text);
    metrics_gauges_remove(put_gauge, &v);
    text = NULL;
    f = open_memstream(&text, &len);
    metrics_render(f, NULL, NULL);
    fclose(f);
    CHECK(strstr(text, "sbx_test_gauge") == NULL, "a removed one is not");
    free(text);
}

static void test_no_billing(void)
{
    struct sbx_err err = {0};
    struct billing_exec x;
    CHECK(billing_admit("u", &err) == 0, "without a billing everything is admitted");
    billing_exec_begin("u", "k", "sb", "v2", &x);
    CHECK(x.token == 0, "and nothing is counted");
    billing_meter_exec(&x);
    billing_exec_drop(&x);
}

int main(void)
{
    test_cost();
    test_month_start();
    test_store_usage();
    test_metrics_page();
    test_metrics_sources();
    test_no_billing();
    return CHECK_DONE();
}
