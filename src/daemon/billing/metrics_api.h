/* The metrics page's own listener (SBX_METRICS_LISTEN), beside the API's /metrics. */
#ifndef SBX_METRICS_API_H
#define SBX_METRICS_API_H

#include "../../common/err.h"

struct sbxd;
struct metrics_listener;

/* *out stays NULL when the operator set no SBX_METRICS_LISTEN. */
int metrics_listener_new(struct sbxd *d, struct metrics_listener **out, struct sbx_err *err);
void metrics_listener_free(struct metrics_listener *m);

#endif
