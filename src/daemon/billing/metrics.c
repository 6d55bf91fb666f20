#include "metrics.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"

enum metric_type { COUNTER, HISTOGRAM };

static const double op_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                    2.5,   5,    10,    30,   60,  300,  900};
static const double store_buckets[] = {0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005,
                                       0.01,    0.05,    0.1,    0.5,    1};
#define BUCKETS_MAX 16

static const struct family_def {
    const char *name, *help;
    enum metric_type type;
    const double *buckets;
    size_t nbuckets;
} defs[M_FAMILIES] = {
    [M_HTTP_REQUESTS] = {"sbx_http_requests_total", "HTTP requests answered, by route and status",
                         COUNTER},
    [M_OP_DURATION] = {"sbx_operation_duration_seconds",
                       "Latency of create, exec, run, run_code, resume and fork requests",
                       HISTOGRAM, op_buckets, SBX_ARRAY_SIZE(op_buckets)},
    [M_ERRORS] = {"sbx_errors_total", "Error answers, by API error code", COUNTER},
    [M_EXEC_SECONDS] = {"sbx_exec_seconds_total",
                        "Wall time of execs, run_code cells and background processes, by backend",
                        COUNTER},
    [M_EXECS] = {"sbx_execs_total", "Execs, cells and background processes finished, by backend",
                 COUNTER},
    [M_EGRESS_CONNS] = {"sbx_egress_connections_total", "Egress connections, by verdict", COUNTER},
    [M_EGRESS_BYTES] = {"sbx_egress_bytes_total",
                        "Egress bytes, by verdict and direction (up: sandbox to upstream)",
                        COUNTER},
    [M_STORE_DURATION] = {"sbx_store_statement_duration_seconds",
                          "Run time of each store (SQLite) statement", HISTOGRAM, store_buckets,
                          SBX_ARRAY_SIZE(store_buckets)},
    [M_SETTLEMENTS] = {"sbx_billing_settled_intervals_total", "Billing intervals settled", COUNTER},
    [M_CHARGED] = {"sbx_billing_charged_micro_eur_total",
                   "Micro-EUR charged to wallets by settlement", COUNTER},
};

struct series {
    char *labels;
    double value; /* counter value, or a histogram's sum */
    unsigned long long count;
    unsigned long long bucket[BUCKETS_MAX];
};

static struct family {
    struct series *s;
    size_t n;
} fams[M_FAMILIES];
/* The store's statement hook runs on whichever thread uses the store. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct series *series_for(enum metric_family f, const char *labels)
{
    struct family *fa = &fams[f];
    for (size_t i = 0; i < fa->n; i++)
        if (!strcmp(fa->s[i].labels, labels))
            return &fa->s[i];
    /* A bound on what a client can make us keep: later label sets share one series. */
    if (fa->n >= METRICS_SERIES_MAX)
        labels = "other=\"1\"";
    for (size_t i = 0; i < fa->n; i++)
        if (!strcmp(fa->s[i].labels, labels))
            return &fa->s[i];
    fa->s = sbx_xrealloc(fa->s, (fa->n + 1) * sizeof(*fa->s));
    struct series *s = &fa->s[fa->n++];
    memset(s, 0, sizeof(*s));
    s->labels = sbx_xstrdup(labels);
    return s;
}

void metrics_add(enum metric_family f, const char *labels, double v)
{
    pthread_mutex_lock(&lock);
    series_for(f, labels ? labels : "")->value += v;
    pthread_mutex_unlock(&lock);
}

void metrics_observe(enum metric_family f, const char *labels, double v)
{
    pthread_mutex_lock(&lock);
    struct series *s = series_for(f, labels ? labels : "");
    s->value += v;
    s->count++;
    for (size_t i = 0; i < defs[f].nbuckets; i++)
        if (v <= defs[f].buckets[i])
            s->bucket[i]++;
    pthread_mutex_unlock(&lock);
}

void metrics_label(char *dst, size_t cap, const char *name, const char *value)
{
    size_t n = (size_t)snprintf(dst, cap, "%s=\"", name);
    for (const char *p = value; *p && n + 4 < cap; p++) {
        if (*p == '"' || *p == '\\' || *p == '\n') {
            dst[n++] = '\\';
            dst[n++] = *p == '\n' ? 'n' : *p;
        } else {
            dst[n++] = *p;
        }
    }
    if (n + 2 <= cap) {
        dst[n++] = '"';
        dst[n] = '\0';
    }
}

/* Segments that name one of a collection: the segment after them is an id. */
static bool names_collection(const char *seg, size_t n)
{
    static const char *const c[] = {"sandboxes", "execs", "sessions", "processes",
                                    "pty",       "keys",  "snapshots", "volumes"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(c); i++)
        if (strlen(c[i]) == n && !strncmp(seg, c[i], n))
            return true;
    return false;
}

/* "/v1/sandboxes/sb_1/files/a/b" -> "/v1/sandboxes/{id}/files/{path}", so ids and
 * paths never become label values. */
static void route_of(const char *path, char *out, size_t cap)
{
    size_t n = 0;
    bool id_next = false;
    out[0] = '\0';
    for (const char *p = path; *p == '/' && n + 1 < cap;) {
        const char *seg = p + 1, *end = strchrnul(seg, '/');
        size_t len = (size_t)(end - seg);
        const char *put = NULL;
        size_t put_len = len;
        if (id_next && !(len == 3 && !strncmp(seg, "run", 3))) {
            put = "{id}";
            put_len = 4;
        } else {
            put = seg;
        }
        n += (size_t)snprintf(out + n, cap - n, "/%.*s", (int)put_len, put);
        if (n >= cap)
            break;
        if ((len == 5 && !strncmp(seg, "files", 5)) ||
            (len == 9 && !strncmp(seg, "artifacts", 9))) {
            if (*end == '/' && end[1])
                snprintf(out + n, cap - n, "/{path}");
            return;
        }
        id_next = !id_next && names_collection(seg, len);
        p = end;
    }
}

/* The routes whose latency is an operation's. */
static const char *op_of(const char *method, const char *route)
{
    static const struct {
        const char *method, *route, *op;
    } ops[] = {
        {"POST", "/v1/sandboxes", "create"},
        {"POST", "/v1/sandboxes/run", "run"},
        {"POST", "/v1/sandboxes/{id}/exec", "exec"},
        {"POST", "/v1/sandboxes/{id}/run_code", "run_code"},
        {"POST", "/v1/sandboxes/{id}/resume", "resume"},
        {"POST", "/v1/sandboxes/{id}/fork", "fork"},
        {"POST", "/v1/sandboxes/{id}/pause", "pause"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ops); i++)
        if (!strcmp(ops[i].method, method) && !strcmp(ops[i].route, route))
            return ops[i].op;
    return NULL;
}

void metrics_http_done(const char *method, const char *path, unsigned status, long long ms)
{
    char route[160], l1[200], l2[64], labels[METRICS_LABELS_MAX];
    route_of(path ? path : "", route, sizeof(route));
    metrics_label(l1, sizeof(l1), "route", route);
    metrics_label(l2, sizeof(l2), "method", method ? method : "");
    snprintf(labels, sizeof(labels), "%s,%s,status=\"%u\"", l2, l1, status);
    metrics_add(M_HTTP_REQUESTS, labels, 1);
    const char *op = method ? op_of(method, route) : NULL;
    if (op && status >= 200 && status < 300) {
        snprintf(labels, sizeof(labels), "op=\"%s\"", op);
        metrics_observe(M_OP_DURATION, labels, (double)ms / 1000.0);
    }
}

void metrics_error(const char *code)
{
    char labels[METRICS_LABELS_MAX];
    metrics_label(labels, sizeof(labels), "code", code);
    metrics_add(M_ERRORS, labels, 1);
}

void metrics_egress(const char *verdict, long long bytes_up, long long bytes_down)
{
    char v[64], labels[METRICS_LABELS_MAX];
    metrics_label(v, sizeof(v), "verdict", verdict ? verdict : "");
    metrics_add(M_EGRESS_CONNS, v, 1);
    snprintf(labels, sizeof(labels), "%s,direction=\"up\"", v);
    metrics_add(M_EGRESS_BYTES, labels, (double)bytes_up);
    snprintf(labels, sizeof(labels), "%s,direction=\"down\"", v);
    metrics_add(M_EGRESS_BYTES, labels, (double)bytes_down);
}

static struct {
    metrics_gauges_fn fn;
    void *data;
} sources[METRICS_SOURCES_MAX];

void metrics_gauges_add(metrics_gauges_fn fn, void *data)
{
    for (size_t i = 0; i < METRICS_SOURCES_MAX; i++) {
        if (!sources[i].fn) {
            sources[i].fn = fn;
            sources[i].data = data;
            return;
        }
    }
}

void metrics_gauges_remove(metrics_gauges_fn fn, void *data)
{
    for (size_t i = 0; i < METRICS_SOURCES_MAX; i++)
        if (sources[i].fn == fn && sources[i].data == data)
            sources[i].fn = NULL;
}

static void le_labels(char *dst, size_t cap, const char *labels, const char *le)
{
    snprintf(dst, cap, "%s%sle=\"%s\"", labels, labels[0] ? "," : "", le);
}

void metrics_render(FILE *out, metrics_gauges_fn gauges, void *data)
{
    pthread_mutex_lock(&lock);
    for (int f = 0; f < M_FAMILIES; f++) {
        const struct family_def *d = &defs[f];
        /* A counter's family name drops _total in the TYPE line (OpenMetrics-compatible). */
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
                d->type == COUNTER ? "counter" : "histogram");
        for (size_t i = 0; i < fams[f].n; i++) {
            const struct series *s = &fams[f].s[i];
            const char *ob = s->labels[0] ? "{" : "", *cb = s->labels[0] ? "}" : "";
            if (d->type == COUNTER) {
                fprintf(out, "%s%s%s%s %.17g\n", d->name, ob, s->labels, cb, s->value);
                continue;
            }
            char lb[METRICS_LABELS_MAX + 32], le[32];
            for (size_t b = 0; b < d->nbuckets; b++) {
                snprintf(le, sizeof(le), "%g", d->buckets[b]);
                le_labels(lb, sizeof(lb), s->labels, le);
                fprintf(out, "%s_bucket{%s} %llu\n", d->name, lb, s->bucket[b]);
            }
            le_labels(lb, sizeof(lb), s->labels, "+Inf");
            fprintf(out, "%s_bucket{%s} %llu\n", d->name, lb, s->count);
            fprintf(out, "%s_sum%s%s%s %.17g\n", d->name, ob, s->labels, cb, s->value);
            fprintf(out, "%s_count%s%s%s %llu\n", d->name, ob, s->labels, cb, s->count);
        }
    }
    pthread_mutex_unlock(&lock);
    if (gauges)
        gauges(out, data);
    for (size_t i = 0; i < METRICS_SOURCES_MAX; i++)
        if (sources[i].fn)
            sources[i].fn(out, sources[i].data);
}

void metrics_reset(void)
{
    pthread_mutex_lock(&lock);
    for (int f = 0; f < M_FAMILIES; f++) {
        for (size_t i = 0; i < fams[f].n; i++)
            free(fams[f].s[i].labels);
        free(fams[f].s);
        fams[f].s = NULL;
        fams[f].n = 0;
    }
    pthread_mutex_unlock(&lock);
}
