/* sbx-shim's docker backend: the attach relay and the engine's kill and remove
 * (shim_docker.c, docs/runtime.md "Docker"). Part of the sbx-shim program. */
#ifndef SBX_RUNTIME_SHIM_DOCKER_H
#define SBX_RUNTIME_SHIM_DOCKER_H

#include <sys/types.h>

struct shim;

/* The engine's options the sandbox's configuration gave (<state_dir>/docker-engine.json,
 * written by rt_start): its request timeout. Defaults when the file is absent. */
void shim_docker_load(struct shim *s);
/* The attach relay's whole life, in the child shim_spawn_relay forked: exits with the
 * container's status. */
void shim_docker_relay(struct shim *s) __attribute__((noreturn));
/* "kill": SIGKILL to the container; anything else: remove it (force). Logged. */
void shim_docker_cmd(struct shim *s, const char *what);

#endif
