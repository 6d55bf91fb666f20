/* sbx-shim's provider backends (e2b, cube): the relay between the shim's pipes and a
 * provider sandbox's envd process stream, and the provider's delete (shim_provider.c,
 * docs/providers.md). Part of the sbx-shim program. */
#ifndef SBX_RUNTIME_SHIM_PROVIDER_H
#define SBX_RUNTIME_SHIM_PROVIDER_H

#include <sys/types.h>

struct shim;

/* Fork the relay with in_r as its stdin (frames to the agent), out_w as its stdout
 * (frames from it) and errfd as its stderr; *pid is the child's, whose exit is the
 * remote agent's. */
int shim_provider_spawn(struct shim *s, int in_r, int out_w, int errfd, pid_t *pid);
/* "kill" and "delete" both delete the provider sandbox (logged); anything else: nothing. */
void shim_provider_cmd(struct shim *s, const char *what);

#endif
