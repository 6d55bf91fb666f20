/* The provider backends' side in sbxd's runtime layer (docs/providers.md): what the shim's
 * provider relay is given (provider.json in the state dir) and what it said when it
 * failed (provider_error.json). */
#ifndef SBX_RUNTIME_PROVIDER_H
#define SBX_RUNTIME_PROVIDER_H

#include <stdbool.h>

#include "../common/err.h"
#include "rt.h"

/* Is this backend a provider's (e2b, cube)? */
bool rt_is_provider(const char *backend);

/* Does a sandbox of this backend (with these docker options, NULL: none) keep its
 * workspace away from this host: at a provider, or in a Docker volume on a remote engine?
 * Then its files, artifacts and receipts' hashes go through the agent, and nothing of the
 * host's workspace directory is the sandbox's (no host-side copy for a pause or fork). */
bool rt_workspace_remote(const char *backend, const struct rt_docker *docker);

/* The most a provider's secrets (its key, its network rules with their headers) take on
 * their way to a shim: within one pipe's buffer, so sbxd writes them before the spawn. */
#define RT_PROVIDER_SECRET_MAX (60u * 1024u)

/* Write <state_dir>/provider.json (0600) for the relay: spec->provider's connection, else
 * the one of the sandbox's last start, else cfg's for the backend; the agent to upload;
 * the sandbox's metadata. What must not rest in a file (the key, the network rules'
 * headers) goes to *secret as JSON {api_key?, network?} for the shim's stdin: NULL when
 * there is none. */
int rt_provider_write(const struct rt_config *cfg, const struct rt_spec *spec,
                      const char *backend, char **secret, struct sbx_err *err);

/* The secret a cleanup helper of this state dir gets: the platform's key when the
 * sandbox's provider.json says its connection is the platform's (cfg), else p's key (its
 * configuration's, which sbxd opens again after a restart); NULL when there is none. */
char *rt_provider_cleanup_secret(const struct rt_config *cfg, const char *state_dir,
                                 const struct rt_provider *p);

/* A pipe whose read end holds secret (closed for writing): its read end, or -errno. */
int rt_provider_secret_pipe(const char *secret);

/* The relay's reason for a failed start, if it left one: fills err (its code and message)
 * and returns its negative errno; 0 when there is none. */
int rt_provider_failure(const char *state_dir, struct sbx_err *err);

/* Did the provider refuse the last pause (the shim's provider_pause_error.json)? Fills
 * err with the mapped code and the provider's message and returns its negative errno
 * (the file is removed), else 0. The provider sandbox then still runs (docs/providers.md). */
int rt_provider_pause_failure(const char *state_dir, struct sbx_err *err);

#endif
