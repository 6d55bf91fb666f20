/* The execution backends behind rt.h (docs/runtime.md): what each one is and keeps. The
 * shim does the per-backend work; the rt_* calls look a sandbox's backend up here and in
 * its bundle's annotation, so a cleanup or a checkpoint needs no caller's word. */
#include <jansson.h>
#include <string.h>

#include "../common/util.h"
#include "oci.h"
#include "rt.h"

static const struct rt_backend backends[] = {
    {.name = "gvisor", .memory_snapshots = true, .isolated = true},
    {.name = "namespaces", .memory_snapshots = false, .isolated = true},
    {.name = "local", .memory_snapshots = false, .isolated = false},
    /* Containers on a Docker Engine (shim_docker.c); isolated as its runtime is (runc,
     * runsc). */
    {.name = "docker", .memory_snapshots = false, .isolated = true},
    /* Sandboxes of E2B-protocol services (shim_provider.c, docs/providers.md): isolated
     * as the provider's are (E2B's are Firecracker microVMs). */
    {.name = "e2b", .memory_snapshots = false, .isolated = true},
    {.name = "cube", .memory_snapshots = false, .isolated = true},
};

const struct rt_backend *rt_backend_find(const char *name)
{
    for (size_t i = 0; name && i < SBX_ARRAY_SIZE(backends); i++)
        if (!strcmp(backends[i].name, name))
            return &backends[i];
    return NULL;
}

const struct rt_backend *rt_backend_of(const char *state_dir)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/bundle/config.json", state_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    const struct rt_backend *b = rt_backend_find(json_string_value(
        json_object_get(json_object_get(doc, "annotations"), OCI_RUNTIME_ANNOTATION)));
    json_decref(doc);
    return b ? b : &backends[0]; /* bundles from before the annotation: gVisor */
}
