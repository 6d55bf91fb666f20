/* config.json for runsc. See docs/runtime.md for why each field is what it is. */
#include "oci.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../common/util.h"
#include "docker_api.h"

/* Docker's default set minus CAP_MKNOD and CAP_NET_RAW (no devices to make, no network). */
static const char *const oci_caps[] = {
    "CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FOWNER",           "CAP_FSETID",
    "CAP_KILL",   "CAP_SETGID",       "CAP_SETUID",           "CAP_SETPCAP",
    "CAP_SETFCAP", "CAP_SYS_CHROOT",  "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE",
};

static const char *const oci_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/tmp",
    "LANG=C.UTF-8",
};

static void jansson_freep(json_t **j)
{
    if (*j)
        json_decref(*j);
}
#define _cleanup_json_ _cleanup_(jansson_freep)

bool oci_id_valid(const char *id)
{
    if (!id || !*id || *id == '-' || strlen(id) > RT_ID_MAX)
        return false;
    for (const char *p = id; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A host path we hand to runsc: absolute, no "..", no "//" surprises, no newline. */
static bool host_path_ok(const char *p)
{
    if (!p || p[0] != '/' || strlen(p) >= 4096)
        return false;
    if (strstr(p, "/../") || strstr(p, "/./") || strchr(p, '\n'))
        return false;
    size_t n = strlen(p);
    if ((n >= 3 && !strcmp(p + n - 3, "/..")) || (n >= 2 && !strcmp(p + n - 2, "/.")))
        return false;
    return true;
}

int oci_cgroups_path(const char *cgroup_parent, const char *id, char *buf, size_t size)
{
    const char *parent = cgroup_parent && *cgroup_parent ? cgroup_parent : "sbx";
    while (*parent == '/')
        parent++;
    size_t plen = strlen(parent);
    while (plen > 0 && parent[plen - 1] == '/')
        plen--;
    if (plen == 0 || strstr(parent, "..") || !oci_id_valid(id))
        return -EINVAL;
    int n = snprintf(buf, size, "/%.*s/%s", (int)plen, parent, id);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

uint64_t oci_cpu_quota_us(uint64_t millicores)
{
    if (millicores == 0)
        return 0;
    uint64_t q = millicores * OCI_CPU_PERIOD_US / 1000u;
    return q < 1000u ? 1000u : q; /* the kernel's minimum quota is 1 ms */
}

static json_t *str_array(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *mount(const char *dst, const char *type, const char *src, json_t *options)
{
    json_t *m = json_pack("{s:s, s:s, s:s}", "destination", dst, "type", type, "source", src);
    if (options)
        json_object_set_new(m, "options", options);
    return m;
}

int oci_build_config(const struct rt_config *cfg, const struct rt_spec *spec, char **out,
                     struct sbx_err *err)
{
    *out = NULL;
    if (!oci_id_valid(spec->id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id '%s'",
                           spec->id ? spec->id : "(null)");
    if (!host_path_ok(spec->rootfs))
        return sbx_err_set(err, EINVAL, "internal", "rootfs must be an absolute path");
    if (!host_path_ok(spec->workspace))
        return sbx_err_set(err, EINVAL, "internal", "workspace must be an absolute path");
    if (!host_path_ok(cfg->agent_path))
        return sbx_err_set(err, EINVAL, "internal", "agent_path must be an absolute path");
    const char *hostname = spec->hostname && *spec->hostname ? spec->hostname : "sbx";
    if (strlen(hostname) > 63 || strchr(hostname, '/'))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid hostname");

    char cgpath[512];
    int r = oci_cgroups_path(cfg->cgroup_parent, spec->id, cgpath, sizeof(cgpath));
    if (r < 0)
        return sbx_err_set(err, -r, "internal", "invalid cgroup parent '%s'",
                           cfg->cgroup_parent ? cfg->cgroup_parent : "");

    json_t *caps = str_array(oci_caps, SBX_ARRAY_SIZE(oci_caps));
    _cleanup_json_ json_t *process = json_pack(
        "{s:b, s:{s:i, s:i}, s:[s], s:o, s:s, s:{s:O, s:O, s:O, s:O}, s:b,"
        " s:[{s:s, s:i, s:i}]}",
        "terminal", 0, "user", "uid", 0, "gid", 0, "args", OCI_AGENT_PATH, "env",
        str_array(oci_env, SBX_ARRAY_SIZE(oci_env)), "cwd", "/", "capabilities", "bounding",
        caps, "effective", caps, "permitted", caps, "inheritable", caps, "noNewPrivileges", 1,
        "rlimits", "type", "RLIMIT_NOFILE", "hard", 65536, "soft", 65536);
    json_decref(caps);
    if (!process)
        return sbx_err_set(err, ENOMEM, "internal", "building process");
    /* The sandbox's process limit is an rlimit that gVisor enforces itself, so fork fails
     * with EAGAIN inside. The host cgroup cannot say it: under the ptrace platform every
     * sandboxed process costs gVisor about a dozen host tasks, and a cgroup pids limit
     * that low kills the whole sandbox instead of failing one fork. */
    if (spec->pids_max)
        json_array_append_new(json_object_get(process, "rlimits"),
                              json_pack("{s:s, s:I, s:I}", "type", "RLIMIT_NPROC", "hard",
                                        (json_int_t)spec->pids_max, "soft",
                                        (json_int_t)spec->pids_max));

    json_t *mounts = json_array();
    json_array_append_new(mounts, mount("/proc", "proc", "proc", NULL));
    json_array_append_new(mounts, mount("/dev", "tmpfs", "tmpfs",
                                        json_pack("[s,s,s]", "nosuid", "strictatime", "mode=755")));
    json_array_append_new(
        mounts, mount("/sys", "sysfs", "sysfs", json_pack("[s,s,s,s]", "nosuid", "noexec", "nodev", "ro")));
    _cleanup_free_ char *shm_size = sbx_xasprintf("size=%u", OCI_SHM_BYTES);
    json_array_append_new(mounts, mount("/dev/shm", "tmpfs", "shm",
                                        json_pack("[s,s,s,s,s]", "nosuid", "noexec", "nodev",
                                                  "mode=1777", shm_size)));
    json_t *tmp_opts = json_pack("[s,s,s]", "nosuid", "nodev", "mode=1777");
    if (spec->tmp_bytes) {
        char sz[48];
        snprintf(sz, sizeof(sz), "size=%llu", (unsigned long long)spec->tmp_bytes);
        json_array_append_new(tmp_opts, json_string(sz));
    }
    json_array_append_new(mounts, mount("/tmp", "tmpfs", "tmpfs", tmp_opts));
    json_array_append_new(mounts, mount("/workspace", "bind", spec->workspace,
                                        json_pack("[s,s,s,s]", "rbind", "rw", "nosuid", "nodev")));
    /* E2B's home (docs/e2b.md): the same workspace, so E2B programs' paths work inside. */
    json_array_append_new(mounts, mount("/home/user", "bind", spec->workspace,
                                        json_pack("[s,s,s,s]", "rbind", "rw", "nosuid", "nodev")));
    json_array_append_new(mounts, mount(OCI_AGENT_PATH, "bind", cfg->agent_path,
                                        json_pack("[s,s,s]", "bind", "ro", "nosuid")));
    /* Not into a template build's writable tree: gVisor would leave the mount point in it. */
    if (cfg->bsl_path && host_path_ok(cfg->bsl_path) && !spec->rootfs_writable)
        json_array_append_new(mounts, mount(OCI_BSL_PATH, "bind", cfg->bsl_path,
                                            json_pack("[s,s,s]", "bind", "ro", "nosuid")));

    if (spec->nmounts > RT_MOUNTS_MAX) {
        json_decref(mounts);
        return sbx_err_set(err, EINVAL, "internal", "more than %d mounts", RT_MOUNTS_MAX);
    }
    for (size_t i = 0; i < spec->nmounts; i++) {
        const struct rt_mount *vm = &spec->mounts[i];
        if (!host_path_ok(vm->source) || !vm->destination || vm->destination[0] != '/') {
            json_decref(mounts);
            return sbx_err_set(err, EINVAL, "internal", "a mount needs absolute paths");
        }
        json_array_append_new(mounts, mount(vm->destination, "bind", vm->source,
                                            json_pack("[s,s,s,s]", "rbind",
                                                      vm->read_only ? "ro" : "rw", "nosuid",
                                                      "nodev")));
    }

    json_t *resources = json_object();
    if (spec->memory_bytes) {
        /* swap == limit: memory+swap capped at the limit, i.e. no swap. */
        json_object_set_new(resources, "memory",
                            json_pack("{s:I, s:I}", "limit", (json_int_t)spec->memory_bytes,
                                      "swap", (json_int_t)spec->memory_bytes));
    }
    if (spec->pids_max)
        json_object_set_new(resources, "pids",
                            json_pack("{s:I}", "limit",
                                      (json_int_t)(spec->pids_max * OCI_HOST_TASKS_PER_PID +
                                                   OCI_HOST_TASKS_BASE)));
    if (spec->cpu_millicores)
        json_object_set_new(resources, "cpu",
                            json_pack("{s:I, s:I}", "quota",
                                      (json_int_t)oci_cpu_quota_us(spec->cpu_millicores),
                                      "period", (json_int_t)OCI_CPU_PERIOD_US));

    json_t *ns = json_pack("[{s:s},{s:s},{s:s},{s:s},{s:s}]", "type", "pid", "type", "ipc",
                           "type", "uts", "type", "mount", "type", "network");

    /* The backend that runs this bundle (docs/runtime.md), for whoever finds it later. */
    _cleanup_json_ json_t *root = json_pack(
        "{s:s, s:O, s:{s:s, s:b}, s:s, s:o, s:{s:s, s:o, s:o}, s:{s:s}}", "ociVersion", "1.0.0",
        "process", process, "root", "path", spec->rootfs, "readonly", !spec->rootfs_writable, "hostname", hostname,
        "mounts", mounts, "linux", "cgroupsPath", cgpath, "resources", resources,
        "namespaces", ns, "annotations", OCI_RUNTIME_ANNOTATION,
        spec->runtime ? spec->runtime : "gvisor");
    if (!root)
        return sbx_err_set(err, ENOMEM, "internal", "building config.json");
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s)
        return sbx_err_set(err, ENOMEM, "internal", "serialising config.json");
    *out = s;
    return 0;
}

int oci_build_docker(const struct rt_config *cfg, const struct rt_spec *spec, char **out,
                     struct sbx_err *err)
{
    *out = NULL;
    if (!oci_id_valid(spec->id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id");
    if (!host_path_ok(spec->workspace) || !host_path_ok(cfg->agent_path))
        return sbx_err_set(err, EINVAL, "internal",
                           "workspace and agent_path must be absolute paths");
    const struct rt_docker none = {0};
    const struct rt_docker *d = spec->docker ? spec->docker : &none;
    const char *net = d->network_mode ? d->network_mode : "none";
    if (strcmp(net, "none") && strcmp(net, "bridge"))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "network_mode must be \"none\" or \"bridge\"");
    _cleanup_free_ char *image =
        d->image ? sbx_xstrdup(d->image)
                 : sbx_xasprintf("sbx-%s", spec->template_name ? spec->template_name : "base");
    const char *hostname = spec->hostname && *spec->hostname ? spec->hostname : "sbx";

    /* A remote engine sees none of this host's files: the agent is copied into the
     * container before its start (so its root filesystem stays writable), the workspace
     * is the sandbox's Docker volume there, and sbx volumes (host directories) cannot be
     * mounted. */
    bool remote = docker_host_remote(d->host);
    if (remote && spec->nmounts)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "sbx volumes are directories on this host: a sandbox on a remote "
                           "docker engine cannot mount them");
    /* The same mounts as the OCI bundle's: the workspace twice (E2B's home), the agent
     * read-only over the template's empty file, sbx-bsl beside it. */
    json_t *binds = json_array();
    json_t *mounts = json_array();
    if (remote) {
        _cleanup_free_ char *vol = sbx_xasprintf(DOCKER_NAME_PREFIX "%s", spec->id);
        for (size_t i = 0; i < 2; i++)
            json_array_append_new(mounts, json_pack("{s:s,s:s,s:s}", "Type", "volume", "Source",
                                                    vol, "Target",
                                                    i ? "/home/user" : "/workspace"));
    } else {
        json_array_append_new(binds, json_sprintf("%s:/workspace:rw", spec->workspace));
        json_array_append_new(binds, json_sprintf("%s:/home/user:rw", spec->workspace));
        json_array_append_new(binds, json_sprintf("%s:" OCI_AGENT_PATH ":ro", cfg->agent_path));
        if (cfg->bsl_path && host_path_ok(cfg->bsl_path))
            json_array_append_new(binds, json_sprintf("%s:" OCI_BSL_PATH ":ro", cfg->bsl_path));
    }
    /* The sandbox's volumes (docs/volumes.md), as in the OCI bundle. A bind is written
     * "source:destination:mode", so neither path may hold a colon. */
    if (spec->nmounts > RT_MOUNTS_MAX) {
        json_decref(mounts);
        json_decref(binds);
        return sbx_err_set(err, EINVAL, "internal", "more than %d mounts", RT_MOUNTS_MAX);
    }
    for (size_t i = 0; i < spec->nmounts; i++) {
        const struct rt_mount *vm = &spec->mounts[i];
        if (!host_path_ok(vm->source) || !vm->destination || vm->destination[0] != '/' ||
            strchr(vm->source, ':') || strchr(vm->destination, ':')) {
            json_decref(binds);
            json_decref(mounts);
            return sbx_err_set(err, EINVAL, "internal",
                               "a volume mount needs absolute paths without a colon");
        }
        json_array_append_new(binds, json_sprintf("%s:%s:%s", vm->source, vm->destination,
                                                  vm->read_only ? "ro" : "rw"));
    }
    _cleanup_free_ char *tmp =
        spec->tmp_bytes ? sbx_xasprintf("rw,nosuid,nodev,mode=1777,size=%llu",
                                        (unsigned long long)spec->tmp_bytes)
                        : sbx_xstrdup("rw,nosuid,nodev,mode=1777");
    /* The open-files limit stays the engine's: a raise past the engine's own hard limit
     * fails the start. */
    json_t *host = json_pack("{s:o, s:o, s:{s:s}, s:b, s:s, s:[s,s], s:[s], s:I, s:b}",
                             "Binds", binds, "Mounts", mounts, "Tmpfs", "/tmp", tmp,
                             "ReadonlyRootfs", !remote, "NetworkMode", net,
                             "CapDrop", "MKNOD", "NET_RAW", "SecurityOpt", "no-new-privileges",
                             "ShmSize", (json_int_t)OCI_SHM_BYTES, "Init", 0);
    if (!host)
        return sbx_err_set(err, ENOMEM, "internal", "building the container's HostConfig");
    if (spec->memory_bytes) {
        json_object_set_new(host, "Memory", json_integer((json_int_t)spec->memory_bytes));
        json_object_set_new(host, "MemorySwap", json_integer((json_int_t)spec->memory_bytes));
    }
    if (spec->pids_max)
        json_object_set_new(host, "PidsLimit", json_integer((json_int_t)spec->pids_max));
    if (spec->cpu_millicores)
        json_object_set_new(host, "NanoCpus",
                            json_integer((json_int_t)spec->cpu_millicores * 1000000));
    if (d->runtime)
        json_object_set_new(host, "Runtime", json_string(d->runtime));
    _cleanup_json_ json_t *root = json_pack(
        "{s:s, s:[s], s:[], s:o, s:s, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:b, s:{s:s}, s:o}",
        "Image", image, "Entrypoint", OCI_AGENT_PATH, "Cmd", "Env",
        str_array(oci_env, SBX_ARRAY_SIZE(oci_env)), "Hostname", hostname, "User", "0:0",
        "WorkingDir", "/", "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1, "OpenStdin",
        1, "StdinOnce", 0, "Tty", 0, "Labels", DOCKER_LABEL_ID, spec->id, "HostConfig", host);
    if (!root)
        return sbx_err_set(err, ENOMEM, "internal", "building the container's config");
    if (d->config_id && *d->config_id)
        json_object_set_new(json_object_get(root, "Labels"), DOCKER_LABEL_CONFIG,
                            json_string(d->config_id));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s)
        return sbx_err_set(err, ENOMEM, "internal", "serialising the container's config");
    *out = s;
    return 0;
}
