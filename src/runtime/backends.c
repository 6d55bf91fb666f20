/* The execution backends behind rt.h (docs/runtime.md): what each one is and keeps. The
 * shim does the per-backend work; the rt_* calls look a sandbox's backend up here and in
 * the "runtime" file of its state dir, so a cleanup or a checkpoint needs no caller's word. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "rt.h"

static const struct rt_backend backends[] = {
    {.name = "gvisor", .memory_snapshots = true, .isolated = true},
    {.name = "namespaces", .memory_snapshots = false, .isolated = true},
    {.name = "local", .memory_snapshots = false, .isolated = false},
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
    _cleanup_free_ char *path = sbx_xasprintf("%s/runtime", state_dir);
    char buf[32] = "";
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    const struct rt_backend *b = rt_backend_find(buf);
    return b ? b : &backends[0]; /* sandboxes from before the file: gVisor */
}
