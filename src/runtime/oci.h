/* The OCI bundle builder: a pure function from (rt_config, rt_spec) to the
 * config.json runsc runs. No I/O, so it is unit-tested (tests/unit/test_oci.c). */
#ifndef SBX_OCI_H
#define SBX_OCI_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "rt.h"

/* Where the agent binary appears inside the sandbox (the template has an empty file there). */
#define OCI_AGENT_PATH "/opt/sbx/sbx-agent"
/* Where sbx-bsl, the BSL analyzer behind the bsl_check tool (docs/bsl.md), appears inside the
 * sandbox: bind-mounted read-only like the agent, over the template's empty file there. */
#define OCI_BSL_PATH "/opt/sbx/sbx-bsl"
#define OCI_CPU_PERIOD_US 100000u
/* The host cgroup pids limit is a host-protection ceiling: gVisor (ptrace) needs about a
 * dozen host tasks per sandboxed process, and keeps some for every process a fork bomb made
 * (pooled stubs; measured +700..1 500 host tasks per bomb held at 128 processes, more when
 * the host is loaded), so the ceiling leaves room for about ten bombs the agent kills
 * (src/agent/pidguard.h) before gVisor itself is refused a task. */
#define OCI_HOST_TASKS_PER_PID 128u
#define OCI_HOST_TASKS_BASE 256u
#define OCI_SHM_BYTES (64u * 1024u * 1024u)
/* The annotation naming the execution backend of a bundle (rt_backend_of reads it). */
#define OCI_RUNTIME_ANNOTATION "sbx.runtime"

/* Is id a valid sandbox id ([a-z0-9_-], 1..RT_ID_MAX, not starting with '-')? */
bool oci_id_valid(const char *id);

/* The cgroupsPath runsc is given: "/<cgroup_parent>/<id>" (runsc without
 * --systemd-cgroup takes an absolute path below each hierarchy's root; a relative
 * one would be joined to runsc's own cgroup). Returns 0 or -ENAMETOOLONG/-EINVAL. */
int oci_cgroups_path(const char *cgroup_parent, const char *id, char *buf, size_t size);

/* CPU quota in microseconds per OCI_CPU_PERIOD_US for a millicore budget (0 = none). */
uint64_t oci_cpu_quota_us(uint64_t millicores);

/* Build config.json. *out is a NUL-terminated, malloc'ed JSON document. Checks that
 * every host path is absolute and the id valid; fills err otherwise. */
int oci_build_config(const struct rt_config *cfg, const struct rt_spec *spec, char **out,
                     struct sbx_err *err);

/* The docker backend's POST /containers/create body for the same sandbox: the image
 * (spec->docker's, else "sbx-<template>"), the agent as entrypoint speaking over the
 * attached stdio, the same mounts, the limits as the engine's (docs/runtime.md "Docker"). */
int oci_build_docker(const struct rt_config *cfg, const struct rt_spec *spec, char **out,
                     struct sbx_err *err);

#endif
