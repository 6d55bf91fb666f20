/* cgroup helpers for the runtime: which layout the host has, and where runsc put a
 * sandbox. The public entry points (rt_cgroup_detect, rt_cgroup_mode_name,
 * rt_cgroup_memory_limit) are declared in rt.h; this header holds the rest. */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "rt.h"

#define RT_CGROUP_ROOT "/sys/fs/cgroup"

/* Find the host directory of a sandbox's cgroup for one controller ("memory",
 * "pids", "cpu"; ignored on v2). Tries "<mount>/<cgroup_parent>/<id>" first, then
 * the cgroup of the sandbox process recorded in runsc's state file. *out is
 * malloc'ed. Returns 0, -ENOENT when the sandbox has no cgroup, or -errno. */
int rt_cgroup_dir(const struct rt_config *cfg, const char *id, const char *controller, char **out,
                  struct sbx_err *err);

/* Read one cgroup file as an unsigned integer: "max" (v2) and v1's "unlimited"
 * (>= 2^62, e.g. 9223372036854771712) read as UINT64_MAX. */
int rt_cgroup_read_u64(const char *dir, const char *file, uint64_t *out, struct sbx_err *err);

/* Sandbox pid from runsc's state file "<root>/<id>_sandbox:<id>.state". */
int rt_runsc_sandbox_pid(const char *runsc_root, const char *id, int *out, struct sbx_err *err);

#endif
