/* Pause, resume and fork as audited calls, shared by the /pause, /resume and /fork routes
 * and the agent tools: each records its outcome in the audit log whether or not anyone
 * still waits, and hands its answer (the JSON the routes return) to cb. */
#ifndef SBX_SNAPCALL_H
#define SBX_SNAPCALL_H

#include <jansson.h>

#include "../../common/err.h"
#include "../sandbox/manager.h"

struct store;
struct snap_call;

/* Once, unless forgotten first: the answer (borrowed) or err. */
typedef void (*snap_answer_fn)(json_t *answer, const struct sbx_err *err, void *data);

struct jobs;
struct snap_origin {
    struct manager *mgr;
    struct jobs *jobs; /* a fork's workspace copies run there (NULL: on the loop) */
    struct store *store;
    const struct auth_identity *who;
    const char *request_id;
};

int snapcall_pause(const struct snap_origin *o, struct sandbox *sb, snap_answer_fn cb, void *data,
                   struct snap_call **out, struct sbx_err *err);
int snapcall_resume(const struct snap_origin *o, struct sandbox *sb, snap_answer_fn cb, void *data,
                    struct snap_call **out, struct sbx_err *err);
/* body: {count?, ttl_seconds?} (invalid_count, invalid_ttl). */
int snapcall_fork(const struct snap_origin *o, struct sandbox *sb, json_t *body, snap_answer_fn cb,
                  void *data, struct snap_call **out, struct sbx_err *err);
/* The requester went away: cb never runs; the operation goes on and is audited. */
void snapcall_forget(struct snap_call *c);

#endif
