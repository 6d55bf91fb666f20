/* The runtime layer: backends that start, find and stop sandboxes. The daemon's
 * manager talks to a sandbox only through the channel socket a backend's shim
 * exposes; what runs underneath (runsc today) is this layer's business. */
#ifndef SBX_RT_H
#define SBX_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define RT_ID_MAX 64

/* Fixed for the life of the daemon. */
struct rt_config {
    const char *runsc_path;     /* "runsc" or an absolute path */
    const char *runsc_platform; /* runsc --platform for run and restore; NULL: runsc's own */
    const char *runsc_root;     /* runsc --root, under the data dir */
    const char *shim_path;      /* the sbx-shim binary */
    const char *agent_path;     /* the static sbx-agent binary, bind-mounted read-only */
    const char *bsl_path;       /* the static sbx-bsl analyzer, bind-mounted read-only at
                                   OCI_BSL_PATH; NULL: none (docs/bsl.md) */
    const char *cgroup_parent;  /* e.g. "sbx": sandboxes live in <parent>/<id> */
    bool debug;                 /* keep runsc debug logs in the sandbox's state dir */
    unsigned start_timeout_ms;  /* rt_start_wait's bound on the agent's first frame; 0 = 10000 */
    bool resumes_in_place;      /* runsc keeps a sandbox running after a checkpoint (rt_probe) */
    const char *docker_host;    /* the docker backend's engine: its unix socket's path */
    /* The provider backends' connections from the environment (SBX_E2B_*, SBX_CUBE_*);
     * a sandbox of a configuration brings its own (rt_spec.provider). NULL: none. */
    const struct rt_provider *e2b;
    const struct rt_provider *cube;
};

/* How a provider backend (e2b, cube) reaches its service and makes its sandboxes
 * (docs/providers.md). Strings are borrowed. */
struct rt_provider {
    const char *api_url;     /* control plane (/sandboxes) */
    const char *api_key;     /* X-API-KEY; NULL or "": none */
    const char *sandbox_url; /* envd through one proxy (proxy_url), or NULL: by host name */
    const char *domain;      /* sandbox_domain, or NULL: the create's answer */
    const char *template_id; /* the provider's template */
    long http_timeout_ms;    /* 0: the default */
    long ttl_s;              /* the provider sandbox's timeout; 0: RT_PROVIDER_TTL_DEFAULT_S */
    const char *network;     /* the provider's network configuration (JSON text), or NULL */
    const char *config_id;   /* its configuration's, in the metadata as PROVIDER_META_CONFIG
                                (the inventory's "unclaimed"); NULL or "" */
};
#define RT_PROVIDER_TTL_DEFAULT_S 3600

/* runsc releases from this date on resume the very sandbox after `checkpoint
 * --leave-running` (older ones restore it behind a new runsc process no shim holds). */
#define RT_RUNSC_IN_PLACE 20240729L

/* In a sandbox's state dir while a fork's checkpoint holds it paused (rt_checkpoint): a
 * paused gVisor sandbox takes no signal, so whoever ends it resumes it first. */
#define RT_HELD_FILE "held"
/* In a provider sandbox's state dir while its checkpoint (sbx's pause) runs: the shim's
 * "kill" pauses the provider sandbox instead of deleting it (shim_provider.c). */
#define RT_PROVIDER_PAUSE_FILE "provider_pause"
/* ... and what the shim leaves when the provider refused that pause (rt_provider_pause_failure). */
#define RT_PROVIDER_PAUSE_ERROR_FILE "provider_pause_error.json"

/* Ask runsc its version and fill cfg->resumes_in_place. */
int rt_probe(struct rt_config *cfg, struct sbx_err *err);

/* A host directory bind-mounted into a sandbox besides /workspace (a volume,
 * docs/volumes.md): rbind, nosuid, nodev, read-only when asked. */
#define RT_MOUNTS_MAX 8
struct rt_mount {
    const char *source;      /* absolute host path */
    const char *destination; /* absolute path inside, checked by the caller */
    bool read_only;
};

/* One sandbox to start. */
struct rt_spec {
    const char *id;          /* [a-z0-9_-], at most RT_ID_MAX */
    const char *rootfs;      /* the template's root filesystem (mounted read-only) */
    bool rootfs_writable;    /* a template build's own copy of it: mounted read-write */
    const char *state_dir;   /* per-sandbox host dir: bundle/, shim.sock, shim.pid, logs */
    const char *workspace;   /* host dir bind-mounted read-write at /workspace */
    uint64_t memory_bytes;   /* 0 = no limit */
    uint64_t pids_max;       /* 0 = no limit */
    uint64_t cpu_millicores; /* 1000 = one core; 0 = no limit */
    uint64_t tmp_bytes;      /* size of the /tmp tmpfs */
    const char *hostname;
    const char *runtime; /* a backend's name (rt_backend_find); NULL = "gvisor" */
    const struct rt_mount *mounts; /* at most RT_MOUNTS_MAX */
    size_t nmounts;
    const char *template_name;     /* the docker backend's default image: "sbx-<name>" */
    const struct rt_docker *docker; /* the docker backend's options; NULL: those of the
                                       sandbox's last start (its docker.json), else defaults */
    const struct rt_provider *provider; /* e2b/cube: the configuration's connection; NULL:
                                           the last start's (provider.json), else cfg's */
};

/* A docker sandbox's container options (docs/runtime.md "Docker"). */
struct rt_docker {
    const char *image;        /* NULL: the template's image, "sbx-<template>" */
    const char *runtime;      /* the engine's runtime (runc, runsc); NULL: the engine's default */
    const char *network_mode; /* "none" (NULL) or "bridge" */
    long long http_timeout_ms; /* the bound on each engine request; 0: the built-in one */
    const char *config_id;     /* its configuration's, labelled DOCKER_LABEL_CONFIG; NULL or "" */
    /* A remote engine (docs/runtime.md "Docker"): "tcp://HOST:PORT" and the directory of
     * ca.pem, cert.pem, key.pem; NULL or "": this host's engine (rt_config.docker_host).
     * On a remote engine the agent is copied into the container and the workspace is a
     * Docker volume there (rt_workspace_remote). */
    const char *host;
    const char *tls_dir;
};

/* The execution backends (docs/runtime.md): gVisor (runsc), Linux namespaces, and the
 * local host (no isolation). All run the same agent behind the same shim. */
struct rt_backend {
    const char *name;
    bool memory_snapshots; /* pause and fork keep memory (runsc checkpoint); otherwise a
                            * checkpoint stops the sandbox and a restore starts it cold over
                            * its kept workspace */
    bool isolated;         /* false: the local host, never for untrusted code */
};
/* NULL when there is no backend of that name. */
const struct rt_backend *rt_backend_find(const char *name);
/* The backend a sandbox was started with (its bundle's "sbx.runtime" annotation). */
const struct rt_backend *rt_backend_of(const char *state_dir);

enum rt_cgroup_mode { RT_CGROUP_V1, RT_CGROUP_HYBRID, RT_CGROUP_V2 };

/* Write the OCI bundle and launch the shim detached (it survives the daemon). Returns
 * at once with *ready_fd (non-blocking, O_CLOEXEC), which becomes readable when the
 * shim has news: the agent's first frame, or why the start failed. The caller owns
 * the fd and reads the outcome with rt_start_read (from an event loop) or
 * rt_start_wait (blocking, bounded by cfg->start_timeout_ms). */
int rt_start(const struct rt_config *cfg, const struct rt_spec *spec, int *ready_fd,
             struct sbx_err *err);
/* 0 when the agent has spoken, -EAGAIN when the shim said nothing yet, otherwise the
 * start failed and err says why (with the tail of runsc's or the shim's log). */
int rt_start_read(const char *id, const char *state_dir, int ready_fd, struct sbx_err *err);
int rt_start_wait(const struct rt_config *cfg, const struct rt_spec *spec, int ready_fd,
                  struct sbx_err *err);

/* Memory snapshots (docs/snapshots.md).
 *
 * A backend without memory snapshots (rt_backend.memory_snapshots false) checkpoints by
 * stopping the sandbox and writing no image (image_dir holds only the agent copy), and
 * restores by starting it cold; the agent's new boot id shows that (restored: false).
 *
 * rt_checkpoint saves a running sandbox into image_dir (created) with `runsc checkpoint`:
 * memory, processes, kernel state. The container stops and its shim exits, keeping the
 * sandbox's directory. With hold, when runsc resumes in place (cfg->resumes_in_place), it
 * is paused instead, checkpointed with --leave-running into an uncompressed image (a fork's:
 * read once, right away), and stays paused (a "held" marker in state_dir says so) until
 * rt_release; a failed checkpoint resumes it. The agent binary the
 * sandbox runs is kept beside the image. Returns at once with *done_fd (non-blocking,
 * O_CLOEXEC), readable when runsc has finished; the caller owns it and reads the outcome
 * with rt_checkpoint_read: 0, -EAGAIN (not yet), or an error with the tail of runsc's
 * output. rt_held says whether the last checkpoint held it. */
int rt_checkpoint(const struct rt_config *cfg, const char *id, const char *state_dir,
                  const char *image_dir, bool hold, int *done_fd, struct sbx_err *err);
int rt_checkpoint_read(const char *image_dir, int done_fd, struct sbx_err *err);
bool rt_held(const char *state_dir);
/* Resume a held sandbox (`runsc resume`) and drop its marker. Blocks for runsc. */
int rt_release(const struct rt_config *cfg, const char *id, const char *state_dir,
               struct sbx_err *err);
/* A daemon killed during a checkpoint leaves its `runsc checkpoint` running, and that
 * still stops the sandbox when done: wait (at most timeout_ms) until the one recorded in
 * image_dir has exited. */
void rt_checkpoint_wait(const char *image_dir, long long timeout_ms);
/* rt_start from a checkpoint image (`runsc restore`), into spec's state dir and workspace,
 * which may differ from the checkpointed sandbox's (a fork). Readiness as for rt_start
 * (rt_start_read): the shim greets the restored agent with a daemon HELLO, with "forked"
 * when the image is restored as one of several copies (docs/protocol.md). The image is
 * read whole during the restore; the caller may remove it once the sandbox is ready. */
int rt_restore(const struct rt_config *cfg, const struct rt_spec *spec, const char *image_dir,
               bool forked, int *ready_fd, struct sbx_err *err);

/* Connect to a sandbox's channel socket: a non-blocking, O_CLOEXEC unix stream fd
 * carrying proto frames to and from its agent. Only one client at a time; a new
 * connection replaces the old. */
int rt_connect(const char *state_dir, int *out_fd, struct sbx_err *err);

/* Is the shim of this sandbox alive? */
bool rt_alive(const char *state_dir);
/* Is any shim or cleanup helper still at work on this state dir? Unlike rt_alive, true
 * until it has exited, after its runsc delete and cgroup removal too: a new container
 * with the same id must wait for that. */
bool rt_busy(const char *state_dir);

/* Ask the shim to kill the sandbox, delete the runsc container and then remove
 * remove_dir (the sandbox's directory, workspace included), off the caller's path.
 * When no shim is alive, do the same cleanup from a detached helper process; a provider
 * sandbox's helper deletes at the provider with provider's key (its configuration's),
 * else the platform's when its connection is that (NULL: nothing but the platform's). */
int rt_destroy(const struct rt_config *cfg, const char *id, const char *state_dir,
               const char *remove_dir, const struct rt_provider *provider, struct sbx_err *err);

/* Ids of the containers runsc knows under cfg->runsc_root. *out is a
 * NULL-terminated array of strings; free with rt_strv_free. */
int rt_list(const struct rt_config *cfg, char ***out, struct sbx_err *err);
void rt_strv_free(char **v);

enum rt_cgroup_mode rt_cgroup_detect(void);
const char *rt_cgroup_mode_name(enum rt_cgroup_mode m);
/* Moving a process into a cgroup waits for an RCU grace period (the kernel's global
 * threadgroup lock), unless another move ended less than a grace period before. A
 * no-op move of the caller into its own cgroup, started as a namespaces create begins,
 * runs that wait beside the create's other work, so the shim's move of the container
 * later finds it passed (docs/runtime.md). Blocks for the grace period: call it on a
 * worker thread. Failures are ignored: it only saves time. */
void rt_cgroup_prime(void);
/* Read the memory limit actually applied to a running sandbox's cgroup. */
int rt_cgroup_memory_limit(const struct rt_config *cfg, const char *id, uint64_t *out,
                           struct sbx_err *err);
/* What a running sandbox's cgroups have counted: the memory its processes use now (page
 * cache included, as the limit counts it) and the CPU time they used since it started. */
struct rt_usage {
    uint64_t memory_bytes;
    uint64_t cpu_usec;
};
int rt_cgroup_usage(const struct rt_config *cfg, const char *id, struct rt_usage *out,
                    struct sbx_err *err);
/* Move a running sandbox's memory cgroup limit (and v1's memory+swap with it, so there
 * is still no swap) to bytes. */
int rt_cgroup_memory_set(const struct rt_config *cfg, const char *id, uint64_t bytes,
                         struct sbx_err *err);

#endif
