/* cgroup v1, hybrid and v2. runsc (without --systemd-cgroup) creates the sandbox's
 * cgroup at cgroupsPath below each v1 hierarchy (/sys/fs/cgroup/<ctrl>/<path>) or
 * below the v2 root (/sys/fs/cgroup/<path>). A hybrid host (v1 controllers plus an
 * empty unified hierarchy at /sys/fs/cgroup/unified) is treated by runsc as v1. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/util.h"
#include "oci.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

enum rt_cgroup_mode rt_cgroup_detect(void)
{
    struct statfs fs;
    if (statfs(RT_CGROUP_ROOT, &fs) == 0 && (unsigned long)fs.f_type == CGROUP2_SUPER_MAGIC)
        return RT_CGROUP_V2;
    if (statfs(RT_CGROUP_ROOT "/unified", &fs) == 0 &&
        (unsigned long)fs.f_type == CGROUP2_SUPER_MAGIC)
        return RT_CGROUP_HYBRID;
    return RT_CGROUP_V1;
}

const char *rt_cgroup_mode_name(enum rt_cgroup_mode m)
{
    switch (m) {
    case RT_CGROUP_V1:
        return "v1";
    case RT_CGROUP_HYBRID:
        return "hybrid";
    case RT_CGROUP_V2:
        return "v2";
    }
    return "unknown";
}

void rt_cgroup_prime(void)
{
    /* "<id>:<controllers>:<path>": the pids hierarchy on v1 and hybrid, "0::" on v2. */
    bool v2 = rt_cgroup_detect() == RT_CGROUP_V2;
    _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
    char line[PATH_MAX + 64], path[PATH_MAX + 128] = "";
    while (f && !path[0] && fgets(line, sizeof(line), f)) {
        char *ctl = strchr(line, ':');
        char *cg = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!cg)
            continue;
        *cg++ = '\0';
        cg[strcspn(cg, "\n")] = '\0';
        if (v2 ? !strcmp(ctl + 1, "") : !strcmp(ctl + 1, "pids"))
            snprintf(path, sizeof(path), RT_CGROUP_ROOT "%s%s/cgroup.procs", v2 ? "" : "/pids", cg);
    }
    if (!path[0])
        return;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    char pid[24];
    int n = snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (fd >= 0)
        (void)!write(fd, pid, (size_t)n);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int rt_runsc_sandbox_pid(const char *runsc_root, const char *id, int *out, struct sbx_err *err)
{
    if (!oci_id_valid(id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id");
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s_sandbox:%s.state", runsc_root, id, id);
    _cleanup_free_ char *data = NULL;
    int r = sbx_read_file(path, 1 << 20, &data, NULL);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    json_error_t jerr;
    json_t *j = json_loads(data, 0, &jerr);
    if (!j)
        return sbx_err_set(err, EINVAL, "internal", "parsing %s: %s", path, jerr.text);
    json_int_t pid = json_integer_value(json_object_get(json_object_get(j, "sandbox"), "pid"));
    json_decref(j);
    if (pid <= 0)
        return sbx_err_set(err, ESRCH, "internal", "no sandbox pid in %s", path);
    *out = (int)pid;
    return 0;
}

/* The cgroup path of pid for controller (v1) or the unified one ("" controller). */
static int proc_cgroup_path(int pid, const char *controller, char **out)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/cgroup", pid);
    _cleanup_free_ char *data = NULL;
    int r = sbx_read_file(p, 1 << 16, &data, NULL);
    if (r < 0)
        return r;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* hierarchy-ID:controller-list:path */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool match = false;
        if (!*controller) {
            match = !strcmp(line, "0") && !*ctrls;
        } else {
            _cleanup_free_ char *cs = sbx_xstrdup(ctrls);
            char *s2 = NULL;
            for (char *c = strtok_r(cs, ",", &s2); c; c = strtok_r(NULL, ",", &s2))
                if (!strcmp(c, controller))
                    match = true;
        }
        if (match) {
            *out = sbx_xstrdup(c2 + 1);
            return 0;
        }
    }
    return -ENOENT;
}

int rt_cgroup_dir(const struct rt_config *cfg, const char *id, const char *controller, char **out,
                  struct sbx_err *err)
{
    *out = NULL;
    char cg[512];
    if (oci_cgroups_path(cfg->cgroup_parent, id, cg, sizeof(cg)) < 0)
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id or cgroup parent");
    bool v2 = rt_cgroup_detect() == RT_CGROUP_V2;
    _cleanup_free_ char *dir = v2 ? sbx_xasprintf("%s%s", RT_CGROUP_ROOT, cg)
                                  : sbx_xasprintf("%s/%s%s", RT_CGROUP_ROOT, controller, cg);
    if (is_dir(dir)) {
        *out = TAKE_PTR(dir);
        return 0;
    }
    /* Not where we asked runsc to put it: ask the kernel where the sandbox process is. */
    int pid = 0;
    struct sbx_err perr = {0};
    int r = rt_runsc_sandbox_pid(cfg->runsc_root, id, &pid, &perr);
    if (r < 0)
        return sbx_err_set(err, ENOENT, "not_found", "no cgroup at %s and %s", dir, perr.msg);
    _cleanup_free_ char *rel = NULL;
    r = proc_cgroup_path(pid, v2 ? "" : controller, &rel);
    if (r < 0)
        return sbx_err_sys(err, -r, "cgroup of sandbox pid %d", pid);
    free(dir);
    dir = v2 ? sbx_xasprintf("%s%s", RT_CGROUP_ROOT, rel)
             : sbx_xasprintf("%s/%s%s", RT_CGROUP_ROOT, controller, rel);
    if (!is_dir(dir))
        return sbx_err_set(err, ENOENT, "not_found", "cgroup %s of pid %d is not mounted here", dir,
                           pid);
    *out = TAKE_PTR(dir);
    return 0;
}

int rt_cgroup_read_u64(const char *dir, const char *file, uint64_t *out, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s", dir, file);
    _cleanup_free_ char *data = NULL;
    int r = sbx_read_file(path, 4096, &data, NULL);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    data[strcspn(data, "\n")] = '\0';
    if (!strcmp(data, "max")) {
        *out = UINT64_MAX;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(data, &end, 10);
    if (errno || end == data || *end)
        return sbx_err_set(err, EINVAL, "internal", "%s: unexpected content '%.40s'", path, data);
    *out = v >= (1ull << 62) ? UINT64_MAX : (uint64_t)v;
    return 0;
}

int rt_cgroup_memory_limit(const struct rt_config *cfg, const char *id, uint64_t *out,
                           struct sbx_err *err)
{
    _cleanup_free_ char *dir = NULL;
    int r = rt_cgroup_dir(cfg, id, "memory", &dir, err);
    if (r < 0)
        return r;
    const char *file = rt_cgroup_detect() == RT_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes";
    return rt_cgroup_read_u64(dir, file, out, err);
}

/* v2's cpu.stat is "key value" lines; usage_usec is the total. */
static int read_v2_cpu_usec(const char *dir, uint64_t *out, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/cpu.stat", dir);
    _cleanup_free_ char *data = NULL;
    int r = sbx_read_file(path, 4096, &data, NULL);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    const char *p = strstr(data, "usage_usec ");
    if (!p || (p != data && p[-1] != '\n'))
        return sbx_err_set(err, EINVAL, "internal", "%s: no usage_usec", path);
    *out = strtoull(p + strlen("usage_usec "), NULL, 10);
    return 0;
}

int rt_cgroup_usage(const struct rt_config *cfg, const char *id, struct rt_usage *out,
                    struct sbx_err *err)
{
    *out = (struct rt_usage){0};
    bool v2 = rt_cgroup_detect() == RT_CGROUP_V2;
    _cleanup_free_ char *mem = NULL, *cpu = NULL;
    int r = rt_cgroup_dir(cfg, id, "memory", &mem, err);
    if (r < 0 || (r = rt_cgroup_read_u64(mem, v2 ? "memory.current" : "memory.usage_in_bytes",
                                         &out->memory_bytes, err)) < 0)
        return r;
    if (v2)
        return read_v2_cpu_usec(mem, &out->cpu_usec, err);
    uint64_t ns = 0;
    if ((r = rt_cgroup_dir(cfg, id, "cpuacct", &cpu, err)) < 0 ||
        (r = rt_cgroup_read_u64(cpu, "cpuacct.usage", &ns, err)) < 0)
        return r;
    out->cpu_usec = ns / 1000;
    return 0;
}

static int write_u64(const char *dir, const char *file, uint64_t v, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s", dir, file);
    char text[32];
    int n = snprintf(text, sizeof(text), "%" PRIu64, v);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening %s", path);
    ssize_t w = write(fd, text, (size_t)n);
    int e = errno;
    close(fd);
    return w == n ? 0 : sbx_err_sys(err, w < 0 ? e : EIO, "writing %s", path);
}

int rt_cgroup_memory_set(const struct rt_config *cfg, const char *id, uint64_t bytes,
                         struct sbx_err *err)
{
    _cleanup_free_ char *dir = NULL;
    int r = rt_cgroup_dir(cfg, id, "memory", &dir, err);
    if (r < 0)
        return r;
    if (rt_cgroup_detect() == RT_CGROUP_V2)
        return write_u64(dir, "memory.max", bytes, err);
    /* v1 wants limit <= memsw at every step: raise memsw first, lower it last. */
    uint64_t cur = 0;
    _cleanup_free_ char *memsw = sbx_xasprintf("%s/memory.memsw.limit_in_bytes", dir);
    bool has_memsw = access(memsw, F_OK) == 0;
    if ((r = rt_cgroup_read_u64(dir, "memory.limit_in_bytes", &cur, err)) < 0)
        return r;
    if (has_memsw && bytes > cur &&
        (r = write_u64(dir, "memory.memsw.limit_in_bytes", bytes, err)) < 0)
        return r;
    if ((r = write_u64(dir, "memory.limit_in_bytes", bytes, err)) < 0)
        return r;
    if (has_memsw && bytes <= cur)
        r = write_u64(dir, "memory.memsw.limit_in_bytes", bytes, err);
    return r;
}
