/* GET /metrics: the Prometheus text format, for an admin key on the API listener, and
 * without a key on SBX_METRICS_LISTEN when the operator opens one (docs/operations.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "../store/usage.h"
#include "billing.h"
#include "metrics.h"
#include "metrics_api.h"

static void put_sandbox_count(const char *status, const char *backend, long long n, void *data)
{
    char st[64], be[64];
    metrics_label(st, sizeof(st), "state", status);
    metrics_label(be, sizeof(be), "backend", backend);
    fprintf(data, "sbx_sandboxes{%s,%s} %lld\n", st, be, n);
}

static void gauges(FILE *out, void *data)
{
    struct sbxd *d = data;
    fputs("# HELP sbx_sandboxes Sandboxes that are not ended, by state and backend\n"
          "# TYPE sbx_sandboxes gauge\n",
          out);
    (void)store_sandbox_count_by_state(d->store, put_sandbox_count, out, NULL);
    long long settled = 0;
    (void)store_billing_get(d->store, "settled_until_ms", &settled, NULL);
    fprintf(out,
            "# HELP sbx_billing_settled_until_seconds End of the last settled billing interval\n"
            "# TYPE sbx_billing_settled_until_seconds gauge\n"
            "sbx_billing_settled_until_seconds %lld\n",
            settled / 1000);
}

static void api_metrics(struct sbxd *d, struct http_req *req)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        http_respond_errorf(req, "internal", "out of memory");
        return;
    }
    metrics_render(f, gauges, d);
    fclose(f);
    int fd = memfd_create("metrics", MFD_CLOEXEC);
    if (fd < 0 || sbx_write_all(fd, text, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
        if (fd >= 0)
            close(fd);
        free(text);
        http_respond_errorf(req, "internal", "cannot buffer the metrics page");
        return;
    }
    free(text);
    http_respond_fd(req, 200, fd, len, "text/plain; version=0.0.4; charset=utf-8");
}

static const struct route routes[] = {
    {"GET", "/metrics", AUTH_ADMIN, api_metrics, 0},
};
const struct route_table metrics_routes = ROUTE_TABLE(routes);

/* The separate listener serves only the page, with no key: it is meant for a scraper on
 * an address the operator keeps private. */
static const struct route public_routes[] = {
    {"GET", "/metrics", AUTH_PUBLIC, api_metrics, 0},
};
static const struct route_table public_table = ROUTE_TABLE(public_routes);
static const struct route_table *const public_tables[] = {&public_table};

struct metrics_listener {
    struct router router;
    struct http_server *http;
};

int metrics_listener_new(struct sbxd *d, struct metrics_listener **out, struct sbx_err *err)
{
    *out = NULL;
    if (!d->cfg.metrics_listen)
        return 0;
    struct metrics_listener *m = sbx_xcalloc(1, sizeof(*m));
    m->router = (struct router){.tables = public_tables, .ntables = 1, .store = d->store, .app = d};
    struct http_server_limits limits = {.idle_s = (unsigned)d->cfg.http_idle_s,
                                        .per_address = (unsigned)d->cfg.http_per_address};
    int r =
        http_server_new(d->loop, d->cfg.metrics_listen, router_dispatch, &m->router,
                        &limits, &m->http, err);
    if (r < 0) {
        free(m);
        return sbx_err_wrap(err, "metrics listener");
    }
    http_server_set_hooks(m->http, billing_http_hooks());
    *out = m;
    return 0;
}

void metrics_listener_free(struct metrics_listener *m)
{
    if (!m)
        return;
    http_server_free(m->http);
    free(m);
}
