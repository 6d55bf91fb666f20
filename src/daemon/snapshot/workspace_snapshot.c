/* v1 workspace snapshots: a copy of the workspace (its image with the quota, else the
 * tree) under the sandbox's dir, which POST /v1/sandboxes {snapshot_id} starts from. */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/wsimage.h"
#include "checkpoint.h"

int snapshot_workspace_copy(struct manager *m, struct sandbox *sb, const char *dir, char **from,
                            struct sbx_err *err)
{
    int r;
    if (m->ws_template) {
        _cleanup_free_ char *src = sbx_xasprintf("%s/workspace.img", sb->dir);
        _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace.img", dir);
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int outfd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        int frozen = checkpoint_freeze_workspace(m, sb);
        r = in < 0 || outfd < 0 ? -errno : sbx_copy_sparse(in, outfd);
        wsimage_thaw(frozen);
        if (r < 0)
            return sbx_err_sys(err, -r, "copying the workspace image");
        if (from)
            *from = TAKE_PTR(dst);
        return 0;
    }
    _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace", dir);
    if ((r = sbx_mkdir_p(dst, 0755)) < 0)
        return sbx_err_sys(err, -r, "creating %s", dst);
    if ((r = wsimage_copy_tree(sb->workspace, dst, err)) < 0)
        return r;
    if (from)
        *from = TAKE_PTR(dst);
    return 0;
}

int snapshot_workspace(struct manager *m, struct sandbox *sb, json_t **out, struct sbx_err *err)
{
    if (!sandbox_is_v1(sb))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v2",
                           "sandbox %s runs on v2: use pause and fork, which keep its memory too",
                           sb->rec.id);
    _cleanup_free_ char *root = sbx_xasprintf("%s/snapshots", sb->dir);
    int n = 0;
    DIR *d = opendir(root);
    for (struct dirent *de; d && (de = readdir(d));)
        n += !strncmp(de->d_name, "snap_", 5);
    if (d)
        closedir(d);
    if (n >= SANDBOX_SNAPSHOTS_MAX)
        return sbx_err_set(err, EAGAIN, "too_many_snapshots", "at most %d snapshots per sandbox",
                           SANDBOX_SNAPSHOTS_MAX);
    char hex[9];
    sbx_random_id("", 4, hex, sizeof(hex));
    _cleanup_free_ char *id = sbx_xasprintf("snap_%s_%s", sb->rec.id + 3, hex);
    _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", root, id);
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    if ((r = snapshot_workspace_copy(m, sb, dir, NULL, err)) < 0) {
        (void)sbx_rm_rf(dir);
        return r;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    long long bytes = dfd < 0 ? 0 : sbx_dir_bytes(dfd, 1);
    *out = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", id, "object", "snapshot", "sandbox_id",
                     sb->rec.id, "size_bytes", (json_int_t)bytes, "created_at",
                     (json_int_t)(sbx_wall_ms() / 1000));
    log_info("sandbox %s: workspace snapshot %s (%lld bytes)", sb->rec.id, id, bytes);
    return 0;
}
