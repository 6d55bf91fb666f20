/* The daemon's operational counters and histograms, rendered in the Prometheus text
 * format (docs/operations.md). Process-wide: every feature reports into it with a one-line
 * call, and only the loop thread calls in. */
#ifndef SBX_METRICS_H
#define SBX_METRICS_H

#include <stdio.h>

/* Distinct label sets kept per family; past it new ones are counted under other="1". */
#define METRICS_SERIES_MAX 2048
#define METRICS_LABELS_MAX 512

enum metric_family {
    M_HTTP_REQUESTS,  /* sbx_http_requests_total{method,route,status} */
    M_OP_DURATION,    /* sbx_operation_duration_seconds{op} */
    M_ERRORS,         /* sbx_errors_total{code} */
    M_EXEC_SECONDS,   /* sbx_exec_seconds_total{backend} */
    M_EXECS,          /* sbx_execs_total{backend} */
    M_EGRESS_CONNS,   /* sbx_egress_connections_total{verdict} */
    M_EGRESS_BYTES,   /* sbx_egress_bytes_total{verdict,direction} */
    M_STORE_DURATION, /* sbx_store_statement_duration_seconds */
    M_SETTLEMENTS,    /* sbx_billing_settled_intervals_total */
    M_CHARGED,        /* sbx_billing_charged_micro_eur_total */
    M_FAMILIES
};

/* labels: the inside of {...}, already escaped (metrics_label), or "" for none. */
void metrics_add(enum metric_family f, const char *labels, double v);
void metrics_observe(enum metric_family f, const char *labels, double v);

/* One finished HTTP request: its route (ids folded into {id}), status and duration. */
void metrics_http_done(const char *method, const char *path, unsigned status, long long ms);
void metrics_error(const char *code);
void metrics_egress(const char *verdict, long long bytes_up, long long bytes_down);

/* Write every family, then the gauges render_more adds (may be NULL). */
typedef void (*metrics_gauges_fn)(FILE *out, void *data);
void metrics_render(FILE *out, metrics_gauges_fn gauges, void *data);
/* Gauges a feature above billing/ owns (warm pools): written at each scrape after the
 * rest, so this module never calls up. At most METRICS_SOURCES_MAX; remove before data
 * goes away. */
#define METRICS_SOURCES_MAX 8
void metrics_gauges_add(metrics_gauges_fn fn, void *data);
void metrics_gauges_remove(metrics_gauges_fn fn, void *data);
/* Write value as a label value: quotes, backslashes and newlines escaped. */
void metrics_label(char *dst, size_t cap, const char *name, const char *value);
/* Forget every series (unit tests). */
void metrics_reset(void);

#endif
