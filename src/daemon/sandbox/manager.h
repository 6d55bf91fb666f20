/* The sandbox manager: the daemon's one owner of sandboxes. It writes every state
 * change to the store first, starts and stops sandboxes through the runtime layer,
 * holds each sandbox's agent channel, enforces TTLs and reconciles the store with
 * what is really running when sbxd starts. */
#ifndef SBX_MANAGER_H
#define SBX_MANAGER_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../../runtime/rt.h"
#include "../auth/auth.h"
#include "../config.h"
#include "../egress/netpolicy.h"
#include "../egress/policy.h"
#include "../store/store.h"
#include "params.h"

#define SANDBOX_READY_TIMEOUT_MS 60000
/* The most a docker sandbox's configuration object takes in the store. */
#define SANDBOX_DOCKER_DOC_MAX 4096
#define SANDBOX_SHIM_GONE_MS 30000 /* a stopped sandbox's shim finishes runsc delete by then */
/* A sandbox's host memory cgroup is its memory_mb + this share of it + this much
 * (machine.c): for a 256 MiB sandbox, 768 MiB. */
#define SANDBOX_MEMORY_HEADROOM_PERCENT 100
#define SANDBOX_MEMORY_HEADROOM_MIN (256ull << 20)

struct manager;
struct sandbox;
struct channel;
struct chan_stream;
struct chan_stream_ops;

typedef void (*sandbox_ready_fn)(struct sandbox *sb, const struct sbx_err *err, void *data);

/* The outcome of a pause (or of a fork's checkpoint): err NULL on success. */
typedef void (*sandbox_op_fn)(struct sandbox *sb, const struct sbx_err *err, void *data);

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
    bool ready;              /* the agent said HELLO on the current channel */
    bool ended;              /* destroyed; freed on the next loop turn */
    bool exec_busy;          /* one exec at a time */
    bool kernel_busy;        /* a run_code cell is in flight (kernel.c) */
    long long ws_generation; /* moves with every change to the workspace */
    char ws_fingerprint[65]; /* of the workspace tree when the generation was set */
    struct sandbox_waiter *waiters;
    struct loop_timer *ttl_timer;
    bool expire_when_ready; /* its TTL ended while it was being created */
    struct loop_timer *ready_timer;
    /* Memory snapshots (docs/snapshots.md). */
    bool paused;          /* checkpointed and stopped: no shim, no channel */
    bool pausing;         /* a checkpoint that stops it is under way (a pause or a fork) */
    bool forking;         /* ... for a fork: it restores right after */
    bool held;            /* a fork's checkpoint left it paused in place (rt_checkpoint) */
    bool chan_lost;       /* the channel closed while pausing */
    bool restoring;       /* started from an image: its HELLO says whether memory came back */
    bool exporting;       /* paused, its pause being copied to shared storage */
    bool cold_tried;      /* the image could not be used: started cold from the workspace */
    bool restored;        /* the last restore brought the agent's memory back (measured) */
    long long ready_ms;   /* the last resume or fork: request to the agent's HELLO */
    long long op_t0;      /* monotonic ms when that began */
    char boot_id[33];     /* the agent's, from its HELLO (store meta boot_id) */
    char expect_boot[33]; /* a restore counts as restored when the agent answers this */
    char parent_id[STORE_ID_MAX + 1]; /* a fork's parent, else "" */
    char *image_dir;                  /* the checkpoint image being taken or restored (owned) */
    bool drop_image;     /* remove image_dir once restored (a resume's; a fork's is shared) */
    long long paused_at; /* unix seconds, while paused */
    /* The v1 backend (docs/snapshots.md): a fresh machine per agent op. */
    bool v1_starting;
    struct loop_timer *machine_timer; /* starts or stops the machine */
    char fallback[96];                /* why a create without backend got v1, else "" */
    int ckpt_fd;                      /* rt_checkpoint's done pipe while one runs, else -1 */
    struct loop_watch *ckpt_watch;
    struct loop_timer *op_timer; /* polls for a stopped shim to be gone */
    long long op_deadline;
    sandbox_op_fn op_cb; /* who waits for the checkpoint */
    void *op_data;
    /* Its egress policy (docs/egress.md), replaced in place; stored in the store's
     * egress_policies, which a fork copies (store_egress_policy_copy) with this. */
    struct egress_policy *egress;
    /* Made from a configuration (docs/configs.md): its id and the network policy it got,
     * kept in the store's sandbox_config_of; "" and NULL without one. */
    char config_id[STORE_ID_MAX + 1];
    struct egress_netpolicy *net;
    /* Its configuration's variables in clear: in memory only (sealed in the store by
     * configs/), shown masked; NULL without. */
    json_t *config_env;
    /* ... and its inject rules' headers in clear, {rule: [{header, value}]}, the same way. */
    json_t *config_inject;
    /* ... and what it says of terminals (seconds, 0: the daemon's idle limit), of a
     * command's default timeout (seconds, 0: the built-in one) and of the desktop, kept in
     * the store's sandbox meta (STORE_META_TERMINAL_IDLE, _COMMAND_TIMEOUT, _DESKTOP_OFF). */
    long long terminal_idle_sec;
    long long command_timeout_sec;
    bool desktop_disabled;
    bool from_pool;       /* handed out ready by the warm pool (templates/pool.c) */
    bool from_warm_image; /* restored from its template's warm snapshot (templates/warm.c) */
    bool warm_holder;     /* paused to hold its template's warm snapshot: no pool member */
    /* Its machine died (docs/runtime.md, "When a machine dies"): no shim, no channel,
     * status failed with rec.end_reason; the workspace stays, and the next exec or a
     * restart starts it cold. */
    bool failed;
    bool restarted;             /* started cold again since: the object shows restored */
    struct sbx_err restart_err; /* why an automatic restart was refused */
    /* A custom template's build (templates/build.c) runs in a sandbox of nobody booted from
     * its own writable copy of the parent's tree; NULL for every other sandbox. */
    char *build_rootfs;
    /* A docker sandbox's container options from its configuration (docs/runtime.md
     * "Docker"), pointing into docker_doc (kept in the store's STORE_META_DOCKER); unset:
     * the image of its template. */
    json_t *docker_doc;
    struct rt_docker docker;
    struct loop_timer *idle_timer; /* its idle_ttl_seconds running (sandbox_idle_arm) */
    /* A provider sandbox's connection from its configuration (docs/providers.md), pointing
     * into provider_doc; unset: the platform's (SBX_E2B_*), or its first start's. */
    json_t *provider_doc;
    struct rt_provider provider;
    /* PTY sessions opened through exec_command: {session id: key id} (live/ptycall.c), so
     * that deleting a key ends them. */
    json_t *pty_owners;
    struct sandbox *next;
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

/* Where a paused sandbox's copy for other nodes goes (SBX_SHARED_SNAPSHOTS), or NULL
 * when there is no shared storage. */
char *manager_export_dir(const struct manager *m, const char *id);
/* Does this node hold the sandbox (anyone's)? */
bool manager_has(const struct manager *m, const char *id);
/* The caller's live sandbox, or sandbox_not_found (also for another user's). */
int manager_lookup(struct manager *m, const struct auth_identity *who, const char *id,
                   struct sandbox **out, struct sbx_err *err);
/* Destroy on the daemon's own account (expiry, failure) ... */
int manager_destroy(struct manager *m, struct sandbox *sb, const char *reason, struct sbx_err *err);
/* ... or on a caller's, which the audit log names. */
int manager_destroy_by(struct manager *m, struct sandbox *sb, const struct auth_identity *who,
                       const char *request_id, const char *reason, struct sbx_err *err);
/* Start sb cold from its workspace: a failed one, or a running one whose machine is
 * stopped first. cb runs when it is ready (sb->ready_ms says how long it took; restored
 * is false) or could not start (it stays failed). sandbox_concurrency_limit when its
 * user or key already runs as many as allowed. */
int manager_restart(struct manager *m, struct sandbox *sb, sandbox_ready_fn cb, void *data,
                    struct sbx_err *err);
/* Whether sb may become running again (a resume, a restart: verb names it in the
 * refusal): sandbox_concurrency_limit when its user or key is at the limit. */
int manager_running_room(struct manager *m, const struct sandbox *sb, const char *verb,
                         struct sbx_err *err);
/* "sb_a, sb_b (fork copy of sb_a), ...": what counts against a running-sandbox limit, for
 * its refusal (key_id NULL: the user's on every key). */
#define SANDBOX_DESCRIBE_MAX 512
void manager_describe_running(struct manager *m, const char *user, const char *key_id, char *out,
                              size_t n);
/* Move the sandbox's end to expires_at (unix seconds; earlier or later), stored first. */
int manager_set_expiry(struct manager *m, struct sandbox *sb, long long expires_at,
                       struct sbx_err *err);
/* Live sandboxes of a user, in creation order. */
typedef void (*sandbox_each_fn)(struct sandbox *sb, void *data);
void manager_each(struct manager *m, const char *user, sandbox_each_fn cb, void *data);

/* Streams the agent opens (egress connections) go to fn, which accepts them like
 * channel_ops.on_open; without one they are refused. */
typedef int (*sandbox_stream_open_fn)(struct sandbox *sb, struct chan_stream *st, json_t *req,
                                      const struct chan_stream_ops **ops, void **sdata, void *data,
                                      struct sbx_err *err);
void manager_set_stream_open(struct manager *m, sandbox_stream_open_fn fn, void *data);

/* One sample of what a running sandbox uses (E2B's metrics): its cgroups' memory in use
 * and CPU time, over the wall time since its container started, and its workspace's disk. */
struct sandbox_usage {
    uint64_t memory_bytes;
    uint64_t cpu_usec;
    long long running_ms; /* since its container started (the shim's sandbox.pid) */
    uint64_t disk_used;   /* bytes, of the workspace's file system (its quota image) */
    uint64_t disk_total;
};
/* -ENOENT when it has no running machine (paused, or v1 between ops). */
int manager_usage(const struct sandbox *sb, struct sandbox_usage *out, struct sbx_err *err);

/* The execution backend a create gets (asked: the request's runtime, or NULL for the
 * default): one the operator enabled, else invalid_runtime (400). */
int manager_runtime_pick(const struct manager *m, const char *asked, const char **out,
                         struct sbx_err *err);
/* A create naming a configuration (p->config_id): fn fills p from it (template, TTL,
 * limits, env, network), refusing what would widen it; what it allocates for p goes in
 * *hold, which the manager drops once the create is done. Without one such creates are
 * refused. */
typedef int (*sandbox_config_fn)(void *data, const struct auth_identity *who,
                                 struct sandbox_params *p, json_t **hold, struct sbx_err *err);
void manager_set_config_fn(struct manager *m, sandbox_config_fn fn, void *data);
/* A provider sandbox's connection when sbxd no longer holds its create's (after an sbxd
 * restart, docs/providers.md): fn opens configuration config_id's e2b/cube object, its
 * api_key in clear (configs/ seals it in the store), as a new object in *out (NULL: the
 * configuration has none). Set by configs/ at start; sandbox/ never includes it. */
typedef int (*sandbox_provider_fn)(void *data, const char *config_id, json_t **out,
                                   struct sbx_err *err);
void manager_set_provider_fn(struct manager *m, sandbox_provider_fn fn, void *data);
/* sb's provider connection (docs/providers.md) from doc, its configuration's e2b/cube
 * object with the key in clear (taken), the sandbox's network policy and its inject
 * rules' headers in clear: what the shim gets on its stdin at the next start. */
void sandbox_provider_set(struct sandbox *sb, json_t *doc, const json_t *network,
                          const json_t *inject);
/* sb's provider connection from its configuration (sb->provider), opened through that
 * hook when sbxd does not hold it (sbxd restarted since the create); 0 also when there is
 * nothing to open (no configuration, no provider: the runtime uses the platform's). */
int sandbox_provider_open(struct sandbox *sb, struct sbx_err *err);
/* The same for a destroy's cleanup (which deletes at the provider when no shim is left):
 * the connection, or NULL (none, or it did not open: logged). */
const struct rt_provider *sandbox_provider_cleanup(struct sandbox *sb);
/* Volumes (docs/volumes.md): creates with "volumes" mount them, every start of a sandbox
 * mounts what it has. Without, creates naming volumes are refused. */
struct volumes;
void manager_set_volumes(struct manager *m, struct volumes *v);
/* Runs at the start of every command (exec_start), before it is sent: skills/ brings a
 * running sandbox's skills up to date there (docs/skills.md, skill_rollout next_turn). */
typedef void (*sandbox_exec_hook_fn)(void *data, struct sandbox *sb);
void manager_set_exec_hook(struct manager *m, sandbox_exec_hook_fn fn, void *data);
void manager_before_exec(struct sandbox *sb);
/* Warm pools (templates/pool.c) plug in here. A create that a pooled sandbox can serve
 * (v2, no snapshot) first asks take for a ready, never-used sandbox of that template and
 * digest; a create that finds the host at capacity asks yield to give one idle sandbox up
 * (true when it destroyed one); a v2 machine boots from image's snapshot when there is one. */
struct sandbox_pool_ops {
    struct sandbox *(*take)(void *data, const char *template_name, const char *digest);
    bool (*yield)(void *data);
    /* The template's warm memory snapshot to restore from, or NULL; boot_id gets the boot
     * id the restored agent answers with. */
    const char *(*image)(void *data, const char *template_name, const char *digest,
                         char boot_id[33]);
};
void manager_set_pool(struct manager *m, const struct sandbox_pool_ops *ops, void *data);
/* A sandbox of no user, for the warm pool: no user's limits apply (the host's v2 capacity
 * does), no env, no egress, the longest TTL. cb as for manager_create. */
int manager_create_pooled(struct manager *m, const char *template_name, sandbox_ready_fn cb,
                          void *data, struct sandbox **out, struct sbx_err *err);
/* A sandbox of no user that runs a template build's steps (templates/build.c): booted from
 * rootfs (a copy of template_name's tree) mounted writable, on an isolated backend, with
 * egress as given and no warm image. cb as for manager_create. */
int manager_create_build(struct manager *m, const char *template_name, const char *rootfs,
                         const struct egress_policy *egress, long long ttl_seconds,
                         sandbox_ready_fn cb, void *data, struct sandbox **out,
                         struct sbx_err *err);
/* The key id a template build's sandbox is recorded with (no key's id looks like it): how
 * a restarted daemon tells them from the pool's, which are nobody's too. */
#define SANDBOX_BUILD_KEY "template-build"
bool sandbox_is_build(const struct sandbox *sb);
/* Waiting in the pool: it belongs to no user (user "" is never a valid user name) and
 * runs no template build. */
bool sandbox_is_pooled(const struct sandbox *sb);
/* Is its workspace away from this host (rt_workspace_remote): a provider's, or a Docker
 * volume on a remote engine? Then its files, artifacts and receipts' hashes go through
 * the agent, and the host's workspace directory is not the sandbox's. */
bool sandbox_workspace_remote(const struct sandbox *sb);

json_t *sandbox_to_json(const struct sandbox *sb);
/* The env every command in it gets: its configuration's variables and its own (a new
 * object). */
json_t *sandbox_env_object(const struct sandbox *sb);
/* What the sandbox's snapshots (a paused image, v1 workspace snapshots) take on disk. */
long long sandbox_snapshot_bytes(const struct sandbox *sb);
#endif
