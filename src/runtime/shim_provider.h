/* sbx-shim's provider backends (e2b, cube): the relay between the shim's pipes and a
 * provider sandbox's envd process stream, and the provider's delete (shim_provider.c,
 * docs/providers.md). Part of the sbx-shim program. */
#ifndef SBX_RUNTIME_SHIM_PROVIDER_H
#define SBX_RUNTIME_SHIM_PROVIDER_H

#include <sys/types.h>

struct shim;

/* Reads what sbxd handed over on stdin (the provider's key and network rules, at most
 * RT_PROVIDER_SECRET_MAX) into s->provider_secret, then points stdin at /dev/null. */
void shim_provider_load(struct shim *s);
/* The provider relay's whole life, in the child shim_spawn_relay forked: exits with the
 * remote agent's status. */
void shim_provider_relay(struct shim *s) __attribute__((noreturn));
/* "kill" and "delete" both delete the provider sandbox (logged), except that "kill" pauses it
 * at the provider when rt_checkpoint left RT_PROVIDER_PAUSE_FILE in the state dir (sbx's
 * pause), and "delete" leaves a paused one; anything else: nothing. */
void shim_provider_cmd(struct shim *s, const char *what);

#endif
