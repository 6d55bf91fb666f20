#include "sweep.h"

#include "../../common/log.h"
#include "../../common/util.h"
#include "../sandbox/manager.h"
#include "workspace.h"

/* The walk's bound: a start-up never spends longer than this many entries per sandbox. */
#define SWEEP_MAX_ENTRIES 200000

static void sweep_one(struct sandbox *sb, void *data)
{
    struct sbx_err err = {0};
    _cleanup_close_ int root = -1;
    if (ws_open_root(sb->workspace, &root, &err) < 0)
        return; /* not mounted (paused, v1 between ops): nothing can be half-renamed there */
    long long n = ws_sweep_uploads(root, SWEEP_MAX_ENTRIES);
    if (n)
        log_info("sandbox %s: removed %lld unfinished upload%s", sb->rec.id, n, n == 1 ? "" : "s");
}

void files_sweep_uploads(struct manager *m)
{
    manager_each(m, NULL, sweep_one, NULL);
}
