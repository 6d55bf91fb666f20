/* The backend table behind rt.h and the record of a sandbox's backend in its bundle. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/runtime/oci.h"
#include "../../src/runtime/rt.h"
#include "check.h"

int main(void)
{
    const struct rt_backend *g = rt_backend_find("gvisor");
    const struct rt_backend *n = rt_backend_find("namespaces");
    const struct rt_backend *l = rt_backend_find("local");
    CHECK(g && g->memory_snapshots && g->isolated, "gvisor keeps memory and isolates");
    CHECK(n && !n->memory_snapshots && n->isolated, "namespaces isolates, keeps no memory");
    CHECK(l && !l->memory_snapshots && !l->isolated, "local isolates nothing");
    CHECK(!rt_backend_find(NULL) && !rt_backend_find("") && !rt_backend_find("Gvisor") &&
              !rt_backend_find("firecracker") && !rt_backend_find("gvisor "),
          "unknown names are refused");

    char tmpl[] = "/tmp/sbx-test-backends-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "temp dir");
    CHECK(rt_backend_of(dir) == g, "a state dir without a record is gVisor's (older sandboxes)");
    _cleanup_free_ char *bundle = sbx_xasprintf("%s/bundle", dir);
    _cleanup_free_ char *f = sbx_xasprintf("%s/config.json", bundle);
    CHECK(sbx_mkdir_p(bundle, 0700) == 0, "bundle dir");
    const char *ns_doc = "{\"annotations\":{\"sbx.runtime\":\"namespaces\"}}";
    CHECK(sbx_write_file_atomic(f, ns_doc, strlen(ns_doc), 0600) == 0, "bundle written");
    CHECK(rt_backend_of(dir) == n, "the bundle's annotation is read back");
    const char *bad = "{\"annotations\":{\"sbx.runtime\":\"bogus\"}}";
    CHECK(sbx_write_file_atomic(f, bad, strlen(bad), 0600) == 0, "bad bundle written");
    CHECK(rt_backend_of(dir) == g, "an unknown annotation reads as gVisor");
    CHECK(sbx_write_file_atomic(f, "{", 1, 0600) == 0, "broken bundle written");
    CHECK(rt_backend_of(dir) == g, "a broken bundle reads as gVisor");

    struct rt_config cfg = {.agent_path = "/opt/agent", .cgroup_parent = "sbx"};
    struct rt_spec spec = {.id = "sb_x",
                           .rootfs = "/r",
                           .state_dir = "/s",
                           .workspace = "/w",
                           .runtime = "namespaces"};
    struct sbx_err err = {0};
    _cleanup_free_ char *json = NULL;
    CHECK(oci_build_config(&cfg, &spec, &json, &err) == 0, "bundle built");
    CHECK(json && strstr(json, "\"sbx.runtime\": \"namespaces\""), "the bundle names its backend");
    (void)sbx_rm_rf(dir);
    return CHECK_DONE();
}
