/* sbx-shim's docker backend: the attach relay and the engine's kill and remove
 * (shim_docker.c, docs/runtime.md "Docker"). Part of the sbx-shim program. */
#ifndef SBX_RUNTIME_SHIM_DOCKER_H
#define SBX_RUNTIME_SHIM_DOCKER_H

#include <sys/types.h>

struct shim;

/* The engine's options the sandbox's configuration gave (<state_dir>/docker-engine.json,
 * written by rt_start): its request timeout. Defaults when the file is absent. */
void shim_docker_load(struct shim *s);
/* Fork the relay with in_r as its stdin (frames to the agent), out_w as its stdout
 * (frames from it) and errfd as its stderr; *pid is the child's, whose exit is the
 * container's. */
int shim_docker_spawn(struct shim *s, int in_r, int out_w, int errfd, pid_t *pid);
/* "kill": SIGKILL to the container; anything else: remove it (force). Logged. */
void shim_docker_cmd(struct shim *s, const char *what);

#endif
