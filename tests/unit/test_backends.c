/* The backend table behind rt.h and the record of a sandbox's backend in its bundle. */
#include <stdbool.h>
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

    /* rt_probe: whether runsc resumes a sandbox in place, from what `runsc --version` says. */
    static const struct {
        const char *out;
        bool in_place;
    } versions[] = {
        {"runsc version 0.0~20240729.0\nspec: 1.0.2-dev\n", true},
        {"runsc version release-20250102.0\nspec: 1.1.0\n", true},
        {"runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", false},
        {"runsc version release-20240728.0\n", false},
        {"runsc version 202407290\n", false},
        {"spec: 20240729\nrunsc version unknown\n", false},
        {"", false},
    };
    _cleanup_free_ char *fake = sbx_xasprintf("%s/runsc", dir);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(versions); i++) {
        _cleanup_free_ char *script = sbx_xasprintf("#!/bin/sh\nprintf '%s'\n", versions[i].out);
        CHECK(sbx_write_file_atomic(fake, script, strlen(script), 0755) == 0, "fake runsc");
        struct rt_config pc = {.runsc_path = fake, .resumes_in_place = !versions[i].in_place};
        struct sbx_err perr = {0};
        CHECK(rt_probe(&pc, &perr) == 0, "probe runs");
        CHECK(pc.resumes_in_place == versions[i].in_place, "in place from %s",
              versions[i].out[0] ? versions[i].out : "(nothing)");
    }
    struct rt_config none = {.runsc_path = "/nonexistent/runsc", .resumes_in_place = true};
    struct sbx_err nerr = {0};
    CHECK(rt_probe(&none, &nerr) == 0 && !none.resumes_in_place,
          "no runsc at all: not in place, and no error (a host with namespaces only)");
    (void)sbx_rm_rf(dir);
    return CHECK_DONE();
}
