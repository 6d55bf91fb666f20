/* Unit tests for the OCI bundle builder (src/runtime/oci.c): read-only root, the
 * mounts, no host path but the three allowed, resource values, cgroupsPath. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/runtime/oci.h"
#include "check.h"

static const struct rt_config cfg = {
    .runsc_path = "runsc",
    .runsc_root = "/var/lib/sbx/runsc",
    .shim_path = "/usr/lib/sbx/sbx-shim",
    .agent_path = "/usr/lib/sbx/sbx-agent",
    .cgroup_parent = "sbx",
};

static struct rt_spec base_spec(void)
{
    struct rt_spec s = {
        .id = "sb-abc_123",
        .rootfs = "/var/cache/sbx/templates/base/rootfs",
        .state_dir = "/var/lib/sbx/sandboxes/sb-abc_123/state",
        .workspace = "/var/lib/sbx/sandboxes/sb-abc_123/workspace",
        .memory_bytes = 512ull << 20,
        .pids_max = 256,
        .cpu_millicores = 1500,
        .tmp_bytes = 64ull << 20,
        .hostname = "box",
    };
    return s;
}

static json_t *build(const struct rt_spec *s)
{
    char *out = NULL;
    struct sbx_err e = {0};
    if (oci_build_config(&cfg, s, &out, &e) < 0) {
        printf("build failed: %s\n", e.msg);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    free(out);
    return j;
}

static json_t *find_mount(json_t *root, const char *dst)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(root, "mounts"), i, m)
    {
        if (!strcmp(json_string_value(json_object_get(m, "destination")), dst))
            return m;
    }
    return NULL;
}

static bool has_opt(json_t *m, const char *opt)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(m, "options"), i, o)
    {
        if (!strcmp(json_string_value(o), opt))
            return true;
    }
    return false;
}

static const char *str_at(json_t *j, const char *a, const char *b)
{
    json_t *x = json_object_get(j, a);
    return json_string_value(b ? json_object_get(x, b) : x);
}

static long long int_at(json_t *j, const char *a, const char *b, const char *c)
{
    json_t *x = json_object_get(json_object_get(json_object_get(j, a), b), c);
    return json_is_integer(x) ? (long long)json_integer_value(x) : -1;
}

static void check_host_paths(json_t *root, const struct rt_spec *s)
{
    /* Host paths can only appear as root.path and as a mount's source. */
    CHECK(!strcmp(str_at(root, "root", "path"), s->rootfs), "root.path is the template rootfs");
    size_t i;
    json_t *m;
    int binds = 0, other_host = 0;
    json_array_foreach(json_object_get(root, "mounts"), i, m)
    {
        const char *type = str_at(m, "type", NULL);
        const char *src = str_at(m, "source", NULL);
        const char *dst = str_at(m, "destination", NULL);
        if (!strcmp(type, "bind")) {
            binds++;
            bool ok = ((!strcmp(dst, "/workspace") || !strcmp(dst, "/home/user")) &&
                       !strcmp(src, s->workspace)) ||
                      (!strcmp(dst, OCI_AGENT_PATH) && !strcmp(src, cfg.agent_path));
            CHECK(ok, "bind mount %s <- %s is one of the three allowed", dst, src);
        } else if (src && src[0] == '/') {
            other_host++;
        }
    }
    CHECK_EQ_INT(binds, 3, "exactly three bind mounts (the workspace is also E2B's home)");
    CHECK_EQ_INT(other_host, 0, "no non-bind mount names a host path");
    /* Nothing else in the document mentions the state dir, runsc root or shim. */
    char *dump = json_dumps(root, 0);
    CHECK(!strstr(dump, "/var/lib/sbx/runsc") && !strstr(dump, "/usr/lib/sbx/sbx-shim") &&
              !strstr(dump, "/state"),
          "no runsc root, shim or state dir in config.json");
    CHECK(!strstr(dump, "SBX_"), "no SBX_ variables");
    free(dump);
}

/* The docker backend's container: the same limits and mounts, said the engine's way. */
static void test_docker(void)
{
    struct rt_spec s = base_spec();
    s.template_name = "office";
    char *out = NULL;
    struct sbx_err e = {0};
    CHECK(oci_build_docker(&cfg, &s, &out, &e) == 0 && out, "docker config builds");
    json_t *c = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    out = NULL;
    json_t *h = json_object_get(c, "HostConfig");
    CHECK(!strcmp(str_at(c, "Image", NULL), "sbx-office"), "the template's image by default");
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(c, "Entrypoint"), 0)),
                  OCI_AGENT_PATH),
          "the agent is the entrypoint");
    CHECK(json_is_true(json_object_get(c, "OpenStdin")) &&
              json_is_false(json_object_get(c, "StdinOnce")) &&
              json_is_false(json_object_get(c, "Tty")),
          "stdin stays open, no TTY: the framed channel");
    CHECK(!strcmp(str_at(h, "NetworkMode", NULL), "none"), "network none by default");
    CHECK(json_is_true(json_object_get(h, "ReadonlyRootfs")), "read-only root");
    CHECK(json_integer_value(json_object_get(h, "Memory")) == 512 << 20 &&
              json_integer_value(json_object_get(h, "MemorySwap")) == 512 << 20,
          "memory without swap");
    CHECK(json_integer_value(json_object_get(h, "PidsLimit")) == 256, "pids limit");
    CHECK(json_integer_value(json_object_get(h, "NanoCpus")) == 1500000000LL, "NanoCpus");
    CHECK(!json_object_get(h, "Runtime"), "the engine's default runtime unless asked");
    CHECK(json_array_size(json_object_get(h, "Binds")) == 3, "workspace twice and the agent");
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(h, "Binds"), 2)),
                  "/usr/lib/sbx/sbx-agent:" OCI_AGENT_PATH ":ro"),
          "the agent read-only");
    json_decref(c);
    struct rt_docker d = {.image = "reg/img:1", .runtime = "runsc", .network_mode = "none"};
    s.docker = &d;
    CHECK(oci_build_docker(&cfg, &s, &out, &e) == 0, "with options");
    c = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    out = NULL;
    CHECK(!strcmp(str_at(c, "Image", NULL), "reg/img:1") &&
              !strcmp(str_at(json_object_get(c, "HostConfig"), "Runtime", NULL), "runsc"),
          "the configuration's image and runtime");
    json_decref(c);
    d.network_mode = "host";
    CHECK(oci_build_docker(&cfg, &s, &out, &e) == -EINVAL && !out, "network host refused");
}

int main(void)
{
    struct rt_spec s = base_spec();
    json_t *root = build(&s);
    CHECK(root != NULL, "config.json builds and parses");
    if (!root)
        return CHECK_DONE();

    /* process */
    json_t *proc = json_object_get(root, "process");
    json_t *args = json_object_get(proc, "args");
    CHECK(json_array_size(args) == 1 &&
              !strcmp(json_string_value(json_array_get(args, 0)), "/opt/sbx/sbx-agent"),
          "process.args is [\"/opt/sbx/sbx-agent\"]");
    CHECK(!strcmp(str_at(proc, "cwd", NULL), "/"), "cwd is /");
    json_t *env = json_object_get(proc, "env");
    size_t i;
    json_t *v;
    int env_ok = 1;
    json_array_foreach(env, i, v)
    {
        const char *e = json_string_value(v);
        if (strncmp(e, "PATH=", 5) && strncmp(e, "HOME=", 5) && strncmp(e, "LANG=", 5))
            env_ok = 0;
    }
    CHECK(env_ok && json_array_size(env) == 3, "env is PATH, HOME and LANG only");
    CHECK(json_is_true(json_object_get(proc, "noNewPrivileges")), "noNewPrivileges is true");
    json_t *bnd = json_object_get(json_object_get(proc, "capabilities"), "bounding");
    int caps_ok = json_array_size(bnd) > 0;
    json_array_foreach(bnd, i, v)
    {
        const char *c = json_string_value(v);
        if (!strcmp(c, "CAP_SYS_ADMIN") || !strcmp(c, "CAP_NET_RAW") ||
            !strcmp(c, "CAP_SYS_PTRACE") || !strcmp(c, "CAP_NET_ADMIN") ||
            !strcmp(c, "CAP_SYS_MODULE") || !strcmp(c, "CAP_MKNOD"))
            caps_ok = 0;
    }
    CHECK(caps_ok, "no SYS_ADMIN, NET_ADMIN, NET_RAW, SYS_PTRACE, SYS_MODULE, MKNOD");
    CHECK_EQ_INT(json_array_size(json_object_get(json_object_get(proc, "capabilities"), "ambient")),
                 0, "no ambient capabilities");

    /* root and hostname */
    CHECK(json_is_true(json_object_get(json_object_get(root, "root"), "readonly")),
          "root is read-only");
    CHECK(!strcmp(str_at(root, "hostname", NULL), "box"), "hostname");
    {
        /* A template build's own copy of the tree (docs/templates.md) is the one writable root. */
        struct rt_spec w = base_spec();
        w.rootfs_writable = true;
        json_t *wr = build(&w);
        CHECK(wr && json_is_false(json_object_get(json_object_get(wr, "root"), "readonly")),
              "a build's root is writable");
        json_decref(wr);
    }

    /* mounts */
    json_t *m;
    CHECK((m = find_mount(root, "/proc")) && !strcmp(str_at(m, "type", NULL), "proc"), "/proc");
    CHECK((m = find_mount(root, "/dev")) && !strcmp(str_at(m, "type", NULL), "tmpfs"),
          "/dev is a tmpfs");
    CHECK((m = find_mount(root, "/sys")) && has_opt(m, "ro"), "/sys is read-only");
    m = find_mount(root, "/tmp");
    CHECK(m && !strcmp(str_at(m, "type", NULL), "tmpfs") && has_opt(m, "size=67108864"),
          "/tmp is a tmpfs of tmp_bytes");
    m = find_mount(root, "/workspace");
    CHECK(m && !strcmp(str_at(m, "type", NULL), "bind") && has_opt(m, "rw") &&
              !strcmp(str_at(m, "source", NULL), s.workspace),
          "/workspace is the workspace, read-write");
    m = find_mount(root, "/opt/sbx/sbx-agent");
    CHECK(m && !strcmp(str_at(m, "type", NULL), "bind") && has_opt(m, "ro") &&
              !strcmp(str_at(m, "source", NULL), cfg.agent_path),
          "the agent is bound read-only");
    check_host_paths(root, &s);
    CHECK(!find_mount(root, OCI_BSL_PATH), "without bsl_path, no sbx-bsl mount");
    {
        /* sbx-bsl, the analyzer behind bsl_check (docs/bsl.md): bound read-only, nosuid */
        struct rt_config bc = cfg;
        bc.bsl_path = "/usr/lib/sbx/sbx-bsl";
        char *text = NULL;
        struct sbx_err be = {0};
        CHECK(oci_build_config(&bc, &s, &text, &be) == 0, "a bundle with sbx-bsl");
        json_t *br = text ? json_loads(text, 0, NULL) : NULL;
        json_t *bm = br ? find_mount(br, OCI_BSL_PATH) : NULL;
        CHECK(bm && !strcmp(str_at(bm, "type", NULL), "bind") && has_opt(bm, "ro") &&
                  has_opt(bm, "nosuid") && !strcmp(str_at(bm, "source", NULL), bc.bsl_path),
              "sbx-bsl is bound read-only at " OCI_BSL_PATH);
        json_decref(br);
        free(text);
        struct rt_spec ws = s;
        ws.rootfs_writable = true; /* a template build's own tree */
        text = NULL;
        CHECK(oci_build_config(&bc, &ws, &text, &be) == 0, "a build's bundle");
        br = text ? json_loads(text, 0, NULL) : NULL;
        CHECK(br && !find_mount(br, OCI_BSL_PATH), "no sbx-bsl mount into a template build");
        json_decref(br);
        free(text);
    }

    /* linux */
    json_t *lx = json_object_get(root, "linux");
    CHECK(!strcmp(str_at(lx, "cgroupsPath", NULL), "/sbx/sb-abc_123"), "cgroupsPath /sbx/<id>");
    CHECK_EQ_INT(int_at(lx, "resources", "memory", "limit"), 512ll << 20, "memory limit");
    CHECK_EQ_INT(int_at(lx, "resources", "memory", "swap"), 512ll << 20, "memory+swap = limit");
    CHECK_EQ_INT(int_at(lx, "resources", "pids", "limit"),
                 256 * OCI_HOST_TASKS_PER_PID + OCI_HOST_TASKS_BASE,
                 "the host pids limit leaves room for gVisor's own tasks");
    int nproc = -1;
    json_array_foreach(json_object_get(json_object_get(root, "process"), "rlimits"), i, v)
    {
        if (!strcmp(str_at(v, "type", NULL), "RLIMIT_NPROC"))
            nproc = (int)json_integer_value(json_object_get(v, "soft"));
    }
    CHECK_EQ_INT(nproc, 256, "the sandbox's process limit is RLIMIT_NPROC, enforced by gVisor");
    CHECK_EQ_INT(int_at(lx, "resources", "cpu", "quota"), 150000, "cpu quota for 1500m");
    CHECK_EQ_INT(int_at(lx, "resources", "cpu", "period"), 100000, "cpu period");
    const char *want_ns[] = {"pid", "ipc", "uts", "mount", "network"};
    json_t *ns = json_object_get(lx, "namespaces");
    for (size_t k = 0; k < sizeof(want_ns) / sizeof(want_ns[0]); k++) {
        int found = 0;
        json_array_foreach(ns, i, v) found |= !strcmp(str_at(v, "type", NULL), want_ns[k]);
        CHECK(found, "%s namespace", want_ns[k]);
    }
    CHECK_EQ_INT(json_array_size(ns), 5, "no other namespaces (no host paths in them)");
    json_decref(root);

    /* limits of 0 mean none; tiny CPU budgets clamp to the kernel's 1 ms minimum */
    s.memory_bytes = 0, s.pids_max = 0, s.cpu_millicores = 0, s.tmp_bytes = 0;
    root = build(&s);
    lx = json_object_get(root, "linux");
    CHECK(json_object_size(json_object_get(lx, "resources")) == 0, "no limits when all are 0");
    CHECK(!has_opt(find_mount(root, "/tmp"), "size=0"), "no size=0 on /tmp");
    json_decref(root);
    CHECK_EQ_INT(oci_cpu_quota_us(5), 1000, "5 millicores clamp to a 1000 us quota");
    CHECK_EQ_INT(oci_cpu_quota_us(250), 25000, "250 millicores");

    /* cgroupsPath syntax */
    char buf[128];
    CHECK(oci_cgroups_path("/sbx/", "x1", buf, sizeof(buf)) == 0 && !strcmp(buf, "/sbx/x1"),
          "slashes around the parent are normalised");
    CHECK(oci_cgroups_path(NULL, "x1", buf, sizeof(buf)) == 0 && !strcmp(buf, "/sbx/x1"),
          "default parent is sbx");
    CHECK(oci_cgroups_path("a/../b", "x1", buf, sizeof(buf)) < 0, "'..' in the parent refused");

    /* bad input */
    struct sbx_err e = {0};
    char *out = NULL;
    const char *bad_ids[] = {"", "UPPER", "a/b", "../x", "-x", "a b",
                             "0123456789012345678901234567890123456789012345678901234567890123456789"};
    for (size_t k = 0; k < sizeof(bad_ids) / sizeof(bad_ids[0]); k++) {
        s = base_spec();
        s.id = bad_ids[k];
        CHECK(oci_build_config(&cfg, &s, &out, &e) == -EINVAL && !out, "id '%s' refused",
              bad_ids[k]);
    }
    s = base_spec();
    s.workspace = "relative/ws";
    CHECK(oci_build_config(&cfg, &s, &out, &e) < 0, "relative workspace refused");
    s = base_spec();
    s.rootfs = "/var/cache/../../etc";
    CHECK(oci_build_config(&cfg, &s, &out, &e) < 0, "rootfs with .. refused");
    s = base_spec();
    s.hostname = "a/b";
    CHECK(oci_build_config(&cfg, &s, &out, &e) < 0, "hostname with / refused");
    test_docker();
    return CHECK_DONE();
}
