/* The namespaces and local backends' container, started by sbx-shim in place of
 * `runsc run`: the same OCI bundle (oci.c), interpreted here for the subset oci.c writes.
 * Linked into the shim only. */
#ifndef SBX_NAMESPACES_H
#define SBX_NAMESPACES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Host uids/gids the sandbox's 0..NS_ID_COUNT-1 map to: one unprivileged range, never a
 * host account. The template's files (owned by host root) are unmapped inside, so they
 * cannot be written whatever the mount says; only the workspace is idmapped. */
#define NS_ID_BASE 1879048192u
#define NS_ID_COUNT 65536u

struct ns_run {
    const char *bundle;    /* the directory holding config.json */
    const char *cgroup;    /* "/<parent>/<id>", or NULL for none */
    bool local;            /* the local backend: mount namespace only, no isolation */
};

/* Start the container: its init (the agent) is a child of the caller with stdio on
 * in_fd, out_fd, err_fd. Returns 0 once the agent has been exec'ed, or -errno with
 * why filled (the step that failed). */
int ns_spawn(const struct ns_run *run, int in_fd, int out_fd, int err_fd, pid_t *pid, char *why,
             size_t why_size);

/* Kill whatever is left in the sandbox's cgroups (a shim that died left its container
 * to the parent-death signal; this is the belt to that). Returns how many it signalled. */
int ns_kill_cgroup(const char *cgroup);

#endif
