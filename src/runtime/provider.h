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

/* Write <state_dir>/provider.json (0600) for the relay: spec->provider's connection, else
 * the one of the sandbox's last start, else cfg's for the backend; the agent to upload;
 * the sandbox's metadata. */
int rt_provider_write(const struct rt_config *cfg, const struct rt_spec *spec,
                      const char *backend, struct sbx_err *err);

/* The relay's reason for a failed start, if it left one: fills err (its code and message)
 * and returns its negative errno; 0 when there is none. */
int rt_provider_failure(const char *state_dir, struct sbx_err *err);

#endif
