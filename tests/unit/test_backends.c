/* The backend table behind rt.h and the record of a sandbox's backend in its state dir. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/util.h"
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
    _cleanup_free_ char *f = sbx_xasprintf("%s/runtime", dir);
    CHECK(sbx_write_file_atomic(f, "namespaces\n", 11, 0600) == 0, "record written");
    CHECK(rt_backend_of(dir) == n, "the recorded backend is read back");
    CHECK(sbx_write_file_atomic(f, "bogus", 5, 0600) == 0, "bad record written");
    CHECK(rt_backend_of(dir) == g, "an unknown record reads as gVisor");
    (void)sbx_rm_rf(dir);
    return CHECK_DONE();
}
