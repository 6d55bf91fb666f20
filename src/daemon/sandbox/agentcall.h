/* One op on a sandbox's agent whose answer is a single EXIT object, possibly after
 * DATA (sessions, background processes): waits for the sandbox to be ready, opens
 * the stream, and reports the result or an API error exactly once. */
#ifndef SBX_AGENTCALL_H
#define SBX_AGENTCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct sandbox;
struct agentcall;

struct agentcall_ops {
    /* DATA on channel ch (PROTO_CH_STDOUT/STDERR). Optional. */
    void (*on_data)(unsigned ch, const uint8_t *buf, size_t len, void *data);
    /* Once: the agent's EXIT object (borrowed), or err. The call is freed after it. */
    void (*on_done)(json_t *result, const struct sbx_err *err, void *data);
    /* The owner gives the agent's window back with agentcall_credit once it has passed the
     * bytes on (a relay to a slower client); otherwise it is given back as they arrive. */
    bool manual_credit;
};

/* Run req (reference stolen) on sb's agent. On failure nothing is reported later. */
int agentcall_start(struct sandbox *sb, json_t *req, const struct agentcall_ops *ops, void *data,
                    struct agentcall **out, struct sbx_err *err);
/* With manual_credit: n bytes of channel ch are passed on (from on_data or later). */
void agentcall_credit(struct agentcall *c, unsigned ch, size_t n);
/* The requester went away: report nothing more. With stop, ask the agent to end the
 * stream early (a followed log); otherwise its answer is just dropped. */
void agentcall_cancel(struct agentcall *c, bool stop);

#endif
