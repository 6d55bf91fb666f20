/* Background processes metered like execs (docs/billing.md): our POST /processes and
 * E2B's process.Start start theirs here. The start is admitted by billing (402
 * insufficient_balance, 429 sandbox_daily_limit) and counts as running from then on; once
 * the agent has started the process, a process_logs wait stream on it (no output, only
 * its EXIT) tells the daemon when it ends, whoever follows its output or not, and its
 * wall time becomes exec time of the starting user and key. */
#ifndef SBX_PROCMETER_H
#define SBX_PROCMETER_H

#include <jansson.h>

#include "../../common/err.h"
#include "../auth/auth.h"

struct sandbox;
struct procmeter;

/* The agent's answer to the start: its process object (borrowed), or err. */
typedef void (*procmeter_started_fn)(json_t *result, const struct sbx_err *err, void *data);

/* Who starts what: the audit entry (action, e.g. "process.start") names who, the request,
 * the sandbox and the command (audit_command_details), and is written when the agent
 * answers the start, with outcome "started" (and the process's id and pid) or the error. */
struct procmeter_origin {
    const struct auth_identity *who;
    const char *request_id;
    const char *action;
    const char *command; /* what ran, as the caller shows it */
};

/* Run op (a process_start, reference stolen) on sb for o->who. On failure (a billing
 * refusal, the sandbox not running) nothing is reported later. */
int procmeter_start(struct sandbox *sb, const struct procmeter_origin *o, json_t *op,
                    procmeter_started_fn started, void *data, struct procmeter **out,
                    struct sbx_err *err);
/* The requester went away before the answer: it is not told, the process is still
 * metered. Call it only before started ran. */
void procmeter_detach(struct procmeter *m);

#endif
