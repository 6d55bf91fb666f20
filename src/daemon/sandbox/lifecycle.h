/* The manager's inside, for the files of sandbox/ and for snapshot/, which builds pause,
 * resume and fork on the same life cycle. Nothing else includes this: every other
 * feature goes through manager.h. */
#ifndef SBX_SANDBOX_LIFECYCLE_H
#define SBX_SANDBOX_LIFECYCLE_H

#include "manager.h"

#define MANAGER_RUNTIMES_MAX 4

struct manager {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct store *store;
    struct rt_config rt;
    char *runsc_root;
    char *cgroup_parent;
    char *ws_template;         /* the formatted workspace image to clone; NULL without a quota */
    struct wspool *wspool;     /* its clones made ahead; NULL without a quota */
    struct jobs *jobs;         /* workers for the pool and rt_cgroup_prime */
    struct sandbox *sandboxes; /* live ones, newest first */
    sandbox_stream_open_fn stream_open; /* agent-opened streams (egress) */
    void *stream_open_data;
    struct volumes *volumes;     /* docs/volumes.md; NULL: none */
    sandbox_config_fn config_fn; /* creates from a configuration */
    void *config_data;
    sandbox_provider_fn provider_fn; /* a configuration's provider key, after a restart */
    void *provider_data;
    sandbox_exec_hook_fn exec_hook; /* before every command */
    void *exec_hook_data;
    const struct sandbox_pool_ops *pool; /* the warm pool, or NULL */
    void *pool_data;
    /* The execution backends a create may name, the default first (runtimes.c). */
    const char *runtimes[MANAGER_RUNTIMES_MAX];
    int nruntimes;
};

/* runtimes.c: SBX_BACKEND's backends, each proved by a real start when the operator set
 * the list (manager_runtime_pick, manager.h: the one a create gets). */
int manager_runtimes_init(struct manager *m, struct sbx_err *err);

/* manager.c: the registry and the sandbox object. */
struct sandbox *sandbox_alloc(struct manager *m, const char *id);
/* The sandbox of that id in m's list, unless it has ended; NULL otherwise. */
struct sandbox *manager_find_live(struct manager *m, const char *id);
/* reconcile.c: a sandbox object for a stored record (its policy, boot id, parent,
 * fallback and configuration settings read back), not yet among the manager's. */
struct sandbox *sandbox_from_record(struct manager *m, const struct store_sandbox *rec);
/* Among the manager's as paused (its pause time read back), its TTL running. */
void sandbox_keep_paused(struct manager *m, struct sandbox *sb);
void sandbox_free(struct sandbox *sb);
void sandbox_stop_start_watch(struct sandbox *sb);
void sandbox_stop_ckpt_watch(struct sandbox *sb);
/* Answer every waiter (err NULL: ready) and forget them. */
void sandbox_notify_waiters(struct sandbox *sb, const struct sbx_err *err);
void sandbox_add_waiter(struct sandbox *sb, sandbox_ready_fn cb, void *data);
void sandbox_paused_error(const struct sandbox *sb, struct sbx_err *err);
bool sandbox_is_v1(const struct sandbox *sb);
/* Can a PTY outlive the op that opened it (terminals, docs/terminals.md)? Not on v1,
 * whose machine stops when its op ends. */
bool sandbox_keeps_ptys(const struct sandbox *sb);
/* After a restart or for a fork's copy: the stored egress policy; none when there is
 * none or it no longer parses. */
void sandbox_egress_load(struct manager *m, struct sandbox *sb);
/* The configuration's network policy (config_doc_network's form, NULL: none); one that
 * does not parse lets nothing out (-EINVAL). */
int sandbox_network_set(struct sandbox *sb, json_t *network, struct sbx_err *err);
/* A configuration's terminal idle limit and command timeout (seconds, 0: the daemon's)
 * and desktop refusal on sb, stored beside it; ..._load reads them back (a restart). */
int sandbox_config_settings_set(struct manager *m, struct sandbox *sb, long long idle_sec,
                                long long command_timeout_sec, bool desktop_off,
                                struct sbx_err *err);
void sandbox_config_settings_load(struct manager *m, struct sandbox *sb);
/* A docker sandbox's container options (its configuration's docker object, copied), kept
 * in the store beside it so a restarted daemon starts it again the same way; loaded back
 * by sandbox_config_settings_load. */
int sandbox_docker_set(struct manager *m, struct sandbox *sb, json_t *docker, struct sbx_err *err);
/* (Re)arm a docker sandbox's idle timer (docs/runtime.md "Docker", idle_ttl_seconds): it
 * runs while the sandbox has no stream open to its agent, and stops the container when it
 * ends. No-op for other sandboxes. */
void sandbox_idle_arm(struct sandbox *sb);
void sandbox_arm_ttl(struct manager *m, struct sandbox *sb);
/* Run and forget the pending pause or fork callback (sb->op_cb), if any. */
void sandbox_op_finish(struct sandbox *sb, const struct sbx_err *err);
/* Record the end (destroyed or failed, by reason), tear the runtime down, answer every
 * waiter with cause (or a generic reason) and free sb on the next loop turn. */
int sandbox_destroy(struct manager *m, struct sandbox *sb, const char *reason,
                    const struct sbx_err *cause, const struct auth_identity *who,
                    const char *request_id, struct sbx_err *err);

/* machine.c: the runtime instance under a sandbox and its agent channel. */
/* Start sb's machine from image (cold when NULL), watched until its agent's HELLO. */
int sandbox_launch(struct manager *m, struct sandbox *sb, const char *image, bool forked,
                   struct sbx_err *err);
/* Connect to a running machine's shim and greet its agent (a restart re-attaches so). */
int sandbox_attach(struct manager *m, struct sandbox *sb, struct sbx_err *err);
/* Its machine died or stopped under it (reason: runtime_exited, channel_lost, lost,
 * start_failed, ...): a sandbox that ran before is kept as failed with its workspace,
 * its waiters answered with why; a new one is destroyed. */
void sandbox_machine_lost(struct sandbox *sb, const char *reason, const struct sbx_err *why);
/* An image could not be used: start cold from the saved workspace (restored: false). */
void sandbox_cold_start(struct sandbox *sb, const struct sbx_err *why);
/* v1: a fresh machine for the next op, once the last one's shim has let go. */
void sandbox_v1_start(struct sandbox *sb);

/* create.c */
void sandbox_new_id(char out[STORE_ID_MAX + 1]);

#endif
