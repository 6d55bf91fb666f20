/* Volumes' pure parts (src/daemon/volumes/volumes.h): which mount paths are refused, the
 * shape of a create's "volumes", and the OCI bundle's bind mounts of them. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/volumes/volumes.h"
#include "../../src/runtime/oci.h"
#include "check.h"

static void paths(void)
{
    static const char *const good[] = {"/data", "/mnt/models", "/workspace/shared",
                                       "/home/user/cache", "/srv/a-b_c.d", "/datasets/2026"};
    static const char *const bad[] = {"", "data", "/", "//", "/data/", "/a//b", "/a/./b",
                                      "/a/../b", "/..", "/workspace", "/home/user", "/home",
                                      "/opt", "/opt/sbx", "/opt/sbx/x", "/proc", "/proc/1",
                                      "/sys/x", "/dev/shm/x", "/etc", "/usr/local/x", "/tmp/x",
                                      "/var/lib", "/root", "/lib64", "/bin/x", "/workspace/out",
                                      "/workspace/out/x", "/home/user/out/y", "/a:b", "/a,b",
                                      "/a\nb", "/a\tb"};
    struct sbx_err err;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        memset(&err, 0, sizeof(err));
        CHECK(volumes_path_check(good[i], &err) == 0, "%s may be a mount path: %.100s", good[i],
              err.msg);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        CHECK(volumes_path_check(bad[i], &err) < 0 && !strcmp(err.code, "invalid_mount_path"),
              "%s is refused with invalid_mount_path", bad[i]);
    }
    char longp[STORE_VOLUME_PATH_MAX + 3] = "/";
    memset(longp + 1, 'a', STORE_VOLUME_PATH_MAX + 1);
    memset(&err, 0, sizeof(err));
    CHECK(volumes_path_check(longp, &err) < 0, "a path over %d bytes is refused",
          STORE_VOLUME_PATH_MAX);
    memset(&err, 0, sizeof(err));
    CHECK(volumes_path_check(NULL, &err) < 0, "no path is refused");
}

static int check_list(const char *text, const char *code)
{
    json_t *j = json_loads(text, 0, NULL);
    struct sbx_err err = {0};
    int r = volumes_mounts_check(j, &err);
    json_decref(j);
    return code ? r < 0 && !strcmp(err.code, code) : r == 0;
}

static void lists(void)
{
    CHECK(check_list("[]", NULL), "no volumes");
    CHECK(check_list("null", NULL), "null is none");
    CHECK(check_list("[{\"volume\":\"v\",\"path\":\"/a\"},{\"volume\":\"v\",\"path\":\"/b\","
                     "\"read_only\":true}]",
                     NULL),
          "two at two places");
    CHECK(check_list("[{\"volume\":\"v\",\"path\":\"/a\"},{\"volume\":\"w\",\"path\":\"/a/b\"}]",
                     "invalid_mount_path"),
          "nested paths");
    CHECK(check_list("[{\"volume\":\"v\",\"path\":\"/a/b\"},{\"volume\":\"w\",\"path\":\"/a\"}]",
                     "invalid_mount_path"),
          "nested paths, the other way");
    CHECK(check_list("[{\"volume\":\"v\",\"path\":\"/a\"},{\"volume\":\"w\",\"path\":\"/ab\"}]",
                     NULL),
          "a shared prefix is not nesting");
    CHECK(check_list("{\"volume\":\"v\",\"path\":\"/a\"}", "invalid_volume"), "not an array");
    CHECK(check_list("[{\"path\":\"/a\"}]", "invalid_volume"), "no volume");
    CHECK(check_list("[{\"volume\":\"\",\"path\":\"/a\"}]", "invalid_volume"), "empty volume");
    CHECK(check_list("[{\"volume\":\"v\",\"path\":\"/a\",\"read_only\":1}]", "invalid_volume"),
          "read_only not a boolean");
    CHECK(check_list("[\"v:/a\"]", "invalid_volume"), "a string item");
    json_t *many = json_array();
    for (int i = 0; i <= VOLUMES_PER_SANDBOX_MAX; i++) {
        char p[16];
        snprintf(p, sizeof(p), "/d%d", i);
        json_array_append_new(many, json_pack("{s:s,s:s}", "volume", "v", "path", p));
    }
    struct sbx_err err = {0};
    CHECK(volumes_mounts_check(many, &err) < 0 && !strcmp(err.code, "invalid_volume"),
          "more than %d volumes", VOLUMES_PER_SANDBOX_MAX);
    json_decref(many);
}

static void bundle(void)
{
    struct rt_config cfg = {.agent_path = "/opt/agent", .cgroup_parent = "sbx"};
    struct rt_mount m[2] = {{"/data/volumes/vol_1/data", "/data", false},
                            {"/data/volumes/vol_2/data", "/mnt/ro", true}};
    struct rt_spec spec = {.id = "sb_x", .rootfs = "/r", .state_dir = "/s", .workspace = "/w",
                           .mounts = m, .nmounts = 2};
    char *out = NULL;
    struct sbx_err err = {0};
    CHECK(oci_build_config(&cfg, &spec, &out, &err) == 0, "a bundle with volumes: %.100s", err.msg);
    json_t *doc = json_loads(out ? out : "{}", 0, NULL);
    int seen = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "mounts"), i, e)
    {
        const char *dst = json_string_value(json_object_get(e, "destination"));
        json_t *opts = json_object_get(e, "options");
        if (!strcmp(dst, "/data"))
            seen += !strcmp(json_string_value(json_object_get(e, "source")),
                            "/data/volumes/vol_1/data") &&
                    !strcmp(json_string_value(json_array_get(opts, 1)), "rw");
        if (!strcmp(dst, "/mnt/ro"))
            seen += !strcmp(json_string_value(json_array_get(opts, 1)), "ro");
    }
    CHECK_EQ_INT(seen, 2, "both volumes bind-mounted, the second read-only");
    json_decref(doc);
    free(out);
    m[0].source = "relative";
    out = NULL;
    CHECK(oci_build_config(&cfg, &spec, &out, &err) < 0, "a relative source is refused");
    free(out);
}

int main(void)
{
    paths();
    lists();
    bundle();
    return CHECK_DONE();
}
