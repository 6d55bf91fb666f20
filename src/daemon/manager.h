/* The sandbox manager: the daemon's one owner of sandboxes. It writes every state
 * change to the store first, starts and stops sandboxes through the runtime layer,
 * holds each sandbox's agent channel, enforces TTLs and reconciles the store with
 * what is really running when sbxd starts. */
#ifndef SBX_MANAGER_H
#define SBX_MANAGER_H

#include <jansson.h>
#include <stdbool.h>

#include "../common/err.h"
#include "../common/loop.h"
#include "../runtime/rt.h"
#include "auth/auth.h"
#include "config.h"
#include "egress/policy.h"
#include "store/store.h"

#define SANDBOX_TTL_DEFAULT 3600
#define SANDBOX_TTL_MAX 86400
#define SANDBOX_READY_TIMEOUT_MS 60000
#define SANDBOX_ENV_MAX 128
#define SANDBOX_ENV_VALUE_MAX (32 * 1024)

struct manager;
struct sandbox;
struct channel;
struct chan_stream;
struct chan_stream_ops;

typedef void (*sandbox_ready_fn)(struct sandbox *sb, const struct sbx_err *err, void *data);

struct sandbox_waiter {
    sandbox_ready_fn cb;
    void *data;
    struct sandbox_waiter *next;
};

struct sandbox {
    struct manager *mgr;
    struct store_sandbox rec;
    char *dir;       /* <data>/sandboxes/<id> */
    char *state_dir; /* <dir>/state */
    char *workspace; /* <dir>/workspace */
    int start_fd;    /* the shim's readiness pipe while starting, else -1 */
    struct loop_watch *start_watch;
    struct channel *chan;
    bool ready;      /* the agent said HELLO on the current channel */
    bool ended;      /* destroyed; freed on the next loop turn */
    bool exec_busy;  /* one exec at a time */
    bool kernel_busy; /* a run_code cell is in flight (kernel.c) */
    long long ws_generation;     /* moves with every change to the workspace */
    char ws_fingerprint[65];     /* of the workspace tree when the generation was set */
    struct sandbox_waiter *waiters;
    struct loop_timer *ttl_timer;
    struct loop_timer *ready_timer;
    /* Its egress policy (docs/egress.md), replaced in place; stored in the store's
     * egress_policies, which a fork copies (store_egress_policy_copy) with this. */
    struct egress_policy *egress;
    struct sandbox *next;
};

struct sandbox_params {
    const char *template_name; /* validated name */
    long long ttl_seconds;
    json_t *env;               /* validated object of strings, borrowed */
    bool enable_default_session; /* docs/sessions.md */
    struct egress_policy egress;  /* docs/egress.md */
};

int manager_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct manager **out, struct sbx_err *err);
void manager_free(struct manager *m);
struct loop *manager_loop(const struct manager *m);
struct store *manager_store(const struct manager *m);
/* Reconcile the store with the runtime, re-attach live sandboxes, arm TTLs. */
int manager_start(struct manager *m, struct sbx_err *err);

/* Check limits, record the sandbox and start it; cb runs once it is exec-ready or
 * has failed (then the sandbox is already being destroyed). */
int manager_create(struct manager *m, const struct auth_identity *who,
                   const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                   struct sandbox **out, struct sbx_err *err);
/* Run cb when the sandbox is ready (at once when it already is). */
void sandbox_when_ready(struct sandbox *sb, sandbox_ready_fn cb, void *data);
/* Forget a waiter whose requester went away. */
void sandbox_drop_waiter(struct sandbox *sb, void *data);

/* The caller's live sandbox, or sandbox_not_found (also for another user's). */
int manager_lookup(struct manager *m, const struct auth_identity *who, const char *id,
                   struct sandbox **out, struct sbx_err *err);
/* Destroy on the daemon's own account (expiry, failure) ... */
int manager_destroy(struct manager *m, struct sandbox *sb, const char *reason,
                    struct sbx_err *err);
/* ... or on a caller's, which the audit log names. */
int manager_destroy_by(struct manager *m, struct sandbox *sb, const struct auth_identity *who,
                       const char *request_id, const char *reason, struct sbx_err *err);
/* Live sandboxes of a user, in creation order. */
typedef void (*sandbox_each_fn)(struct sandbox *sb, void *data);
void manager_each(struct manager *m, const char *user, sandbox_each_fn cb, void *data);

/* Streams the agent opens (egress connections) go to fn, which accepts them like
 * channel_ops.on_open; without one they are refused. */
typedef int (*sandbox_stream_open_fn)(struct sandbox *sb, struct chan_stream *st, json_t *req,
                                      const struct chan_stream_ops **ops, void **sdata,
                                      void *data, struct sbx_err *err);
void manager_set_stream_open(struct manager *m, sandbox_stream_open_fn fn, void *data);

json_t *sandbox_to_json(const struct sandbox *sb);
/* Checks shared by create and run. */
int sandbox_params_parse(json_t *body, struct sandbox_params *out, struct sbx_err *err);
int sandbox_env_validate(json_t *env, const char *field, struct sbx_err *err);

#endif
