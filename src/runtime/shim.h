/* The shim's state, shared by its two halves: shim.c (the container's life: runsc or the
 * native init, reaping, the end) and shim_relay.c (the frame relay between the one client,
 * sbxd, and the agent's stdio). Not a library: both are the sbx-shim program. */
#ifndef SBX_RUNTIME_SHIM_H
#define SBX_RUNTIME_SHIM_H

#include <stdbool.h>
#include <sys/types.h>

#include "../common/loop.h"
#include "../proto/proto.h"
#include "shim_idle.h"

#define SHIM_OUTQ_MAX (4u * 1024u * 1024u)
#define SHIM_MAX_FRAME ((size_t)PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD)
#define SHIM_READ_CHUNK PROTO_READ_MAX
#define SHIM_KILL_TIMEOUT_MS 5000
#define SHIM_WAIT_TIMEOUT_MS 5000
#define SHIM_DELETE_TIMEOUT_MS 15000

struct shim {
    struct loop *loop;
    const char *id, *state_dir, *runsc, *root;
    const char *cgroup;  /* the cgroupsPath given to runsc, e.g. /sbx/<id>; may be NULL */
    const char *restore; /* checkpoint image dir: runsc restore instead of runsc run */
    bool forked;
    bool debug;
    const char *runtime;  /* "gvisor" (runsc), "namespaces" or "local" (namespaces.c) */
    const char *platform; /* runsc --platform, or NULL for runsc's default */
    bool native;         /* not gvisor: the shim itself starts the container */
    bool docker;         /* the docker backend: the container is the engine's (shim_docker.c) */
    const char *docker_host; /* this host's engine's unix socket */
    long docker_timeout_ms;  /* each engine request's bound (shim_docker_load) */
    /* A remote engine's address and TLS directory, and the host workspace that seeds its
     * volume (shim_docker_load); NULL: this host's engine. */
    char *docker_remote, *docker_tls_dir, *docker_seed;
    bool provider;       /* e2b, cube: the sandbox is a provider's (shim_provider.c) */
    /* Its key and network rules, {api_key?, network?} as sbxd gave them on stdin: only ever
     * in memory (shim_provider_load); NULL: none given. */
    char *provider_secret;
    int log_fd;
    int ready_fd;
    int pid_fd; /* shim.pid, flock'ed for our lifetime */
    int dir_fd; /* the state dir, flock'ed (shared) until we exit: rt_busy */
    char *sock_path, *pid_path, *runsc_log, *log_path;

    int listen_fd;
    struct loop_watch *listen_w;

    int client_fd;
    struct loop_watch *client_w;
    struct proto_decoder *client_dec;
    struct proto_outq *to_client;
    bool client_stalled; /* client_dec holds a whole frame that to_agent has no room for */
    unsigned long long client_seq;

    pid_t launch_pid; /* the `runsc run|restore --detach` process, until it exits */
    pid_t run_pid;    /* the container's: runsc's sandbox process, or the native init */
    int agent_in;     /* runsc's stdin: frames to the agent */
    struct loop_watch *agent_in_w;
    struct proto_outq *to_agent;
    int agent_out; /* runsc's stdout: frames from the agent */
    struct loop_watch *agent_out_w;
    struct proto_decoder *agent_dec;
    bool agent_stalled;
    bool agent_broken; /* malformed stream from the agent: discard everything */

    int sig_fd;
    struct loop_watch *sig_w;

    long long t_spawn;
    unsigned long long frames_up, frames_down, frames_dropped;
    bool drop_said;        /* the log said frames are dropped since the last client left */
    struct shim_idle idle; /* the sentry's timer slack (shim_idle.h) */
    int exit_code;         /* -1 until the container exits */
};

/* shim.log, with a timestamp; ready_say answers the starter (--ready-fd) once. */
void shim_log(struct shim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ready_say(struct shim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fork a backend's relay (shim_docker_relay, shim_provider_relay) with in_r as its stdin
 * (frames to the agent), out_w as its stdout (frames from it) and errfd as its stderr;
 * *pid is the child's, whose exit is the sandbox's. */
int shim_spawn_relay(struct shim *s, int in_r, int out_w, int errfd,
                     void (*relay)(struct shim *s), pid_t *pid);

/* shim_relay.c. The listening socket's callback: the new client replaces the old one. */
void shim_relay_accept(struct loop *l, int fd, uint32_t events, void *data);
/* Watch the agent's stdio (s->agent_in, s->agent_out). */
int shim_relay_agent(struct shim *s);
/* After a restore: the daemon's hello, queued for the agent. */
void shim_relay_hello(struct shim *s);
/* The container ended: take what the agent wrote last, give the client a moment for it. */
void shim_relay_drain(struct shim *s);
void shim_relay_drop_client(struct shim *s, const char *why);

#endif
