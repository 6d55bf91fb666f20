/* Waiting for a port inside a sandbox to accept connections (POST …/preview with
 * wait_seconds): the agent's tcp_connect in probe mode, tried every PORTWAIT_RETRY_MS
 * until it connects or the deadline passes. The sandbox is looked up again for every
 * try, so one that goes away ends the wait with its error. */
#ifndef SBX_PORTWAIT_H
#define SBX_PORTWAIT_H

#include "../../common/err.h"
#include "../auth/auth.h"
#include "../sandbox/manager.h"

#define PORTWAIT_RETRY_MS 100

struct portwait;
/* err NULL: the port accepts connections. */
typedef void (*portwait_fn)(const struct sbx_err *err, void *data);

/* cb runs once, later (never from within portwait_start). */
struct portwait *portwait_start(struct manager *m, const struct auth_identity *who,
                                const char *sandbox_id, unsigned port, long long timeout_ms,
                                portwait_fn cb, void *data);
/* The caller went away: cb will not run. */
void portwait_cancel(struct portwait *pw);

#endif
