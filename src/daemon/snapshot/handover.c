/* A paused sandbox another node can resume (docs/scale-out.md, "Pause and resume"). With
 * SBX_SHARED_SNAPSHOTS, a pause also copies the sandbox's memory image and workspace to
 * <shared>/<id>/ (written beside, then renamed into place, with the pause's time); the
 * pause is answered once the copy is there. When the sandbox's node is unreachable,
 * another node takes the row (store_sandbox_move, under the write lock), copies the
 * export into its own data dir and resumes it as its own. Copies run on the workers. */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/log.h"
#include "../../common/mounts.h"
#include "../../common/util.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/wsimage.h"

#define EXPORT_STAMP "paused_at"
#define COPY_DEPTH_MAX 256 /* directories deep: a workspace's tree, an image's few */

struct handover {
    struct manager *m;
    char id[STORE_ID_MAX + 1];
    char *from, *to; /* directories: the export's or the sandbox's */
    bool image;      /* the workspace is a quota image */
    char *workspace; /* the mount point (an export freezes it; an adoption mounts it) */
    long long paused_at;
    struct store_sandbox rec; /* an adoption's record */
    snapshot_adopt_fn cb;
    void *data;
    int ret;
    struct sbx_err err;
};

static void handover_free(struct handover *h)
{
    free(h->from);
    free(h->to);
    free(h->workspace);
    store_sandbox_clear(&h->rec);
    free(h);
}

static int copy_file(const char *from, const char *to, struct sbx_err *err)
{
    _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = in < 0 || out < 0 ? -errno : sbx_copy_sparse(in, out);
    return r < 0 ? sbx_err_sys(err, -r, "copying %s", from) : 0;
}

/* A copy of a directory tree: files (sparse), directories and links with their modes and
 * owners; anything else (a fifo a user made) is left out. In-process, not cp: sbxd reaps
 * every child on its loop, so a worker could not wait for one. */
static int copy_tree_at(int from, int to, int depth)
{
    if (depth > COPY_DEPTH_MAX)
        return -ELOOP;
    DIR *d = fdopendir(dup(from));
    if (!d)
        return -errno;
    int r = 0;
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(from, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = -errno;
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (mkdirat(to, de->d_name, st.st_mode & 07777) < 0) {
                r = -errno;
                break;
            }
            _cleanup_close_ int sub = openat(from, de->d_name,
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int dsub = openat(to, de->d_name,
                                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            r = sub < 0 || dsub < 0 ? -errno : copy_tree_at(sub, dsub, depth + 1);
            if (r == 0 && fchown(dsub, st.st_uid, st.st_gid) < 0)
                r = -errno;
        } else if (S_ISREG(st.st_mode)) {
            _cleanup_close_ int in = openat(from, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int out =
                in < 0 ? -1
                       : openat(to, de->d_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                st.st_mode & 07777);
            r = in < 0 || out < 0 ? -errno : sbx_copy_sparse(in, out);
            if (r == 0 && (fchown(out, st.st_uid, st.st_gid) < 0 ||
                           fchmod(out, st.st_mode & 07777) < 0))
                r = -errno;
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(from, de->d_name, target, sizeof(target) - 1);
            if (n < 0) {
                r = -errno;
                break;
            }
            target[n] = '\0';
            if (symlinkat(target, to, de->d_name) < 0 ||
                fchownat(to, de->d_name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        }
    }
    closedir(d);
    return r;
}

static int copy_dir(const char *from, const char *to, struct sbx_err *err)
{
    int r = sbx_mkdir_p(to, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", to);
    _cleanup_close_ int in = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int out = open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    r = in < 0 || out < 0 ? -errno : copy_tree_at(in, out, 0);
    return r < 0 ? sbx_err_sys(err, -r, "copying %s to %s", from, to) : 0;
}

/* --- export, on the node that paused it --------------------------------------------- */

static void export_run(void *data)
{
    struct handover *h = data;
    _cleanup_free_ char *part = sbx_xasprintf("%s.part", h->to);
    (void)sbx_rm_rf(part);
    int r = sbx_mkdir_p(part, 0700);
    if (r < 0) {
        h->ret = sbx_err_sys(&h->err, -r, "creating %s", part);
        return;
    }
    _cleanup_free_ char *mem_from = sbx_xasprintf("%s/snapshots/memory", h->from);
    _cleanup_free_ char *mem_to = sbx_xasprintf("%s/memory", part);
    if (h->image) {
        _cleanup_free_ char *src = sbx_xasprintf("%s/workspace.img", h->from);
        _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace.img", part);
        /* Uploads may still reach a paused sandbox's files: hold them while copying. */
        int frozen = wsimage_freeze(h->workspace);
        h->ret = copy_file(src, dst, &h->err);
        wsimage_thaw(frozen);
    } else {
        _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace", part);
        h->ret = copy_dir(h->workspace, dst, &h->err);
    }
    if (h->ret == 0)
        h->ret = copy_dir(mem_from, mem_to, &h->err);
    char stamp[24];
    int n = snprintf(stamp, sizeof(stamp), "%lld\n", h->paused_at);
    _cleanup_free_ char *stamp_path = sbx_xasprintf("%s/" EXPORT_STAMP, part);
    if (h->ret == 0 && (r = sbx_write_file_atomic(stamp_path, stamp, (size_t)n, 0600)) < 0)
        h->ret = sbx_err_sys(&h->err, -r, "writing %s", stamp_path);
    if (h->ret == 0) {
        (void)sbx_rm_rf(h->to);
        if (rename(part, h->to) < 0)
            h->ret = sbx_err_sys(&h->err, errno, "moving the export into %s", h->to);
    }
    if (h->ret < 0)
        (void)sbx_rm_rf(part);
}

static void export_done(void *data, bool ran)
{
    struct handover *h = data;
    struct sandbox *sb = NULL;
    for (struct sandbox *s = h->m->sandboxes; s; s = s->next)
        if (!strcmp(s->rec.id, h->id))
            sb = s;
    if (!ran && h->ret == 0)
        sbx_err_set(&h->err, ECANCELED, "internal", "sbxd stopped first");
    if (!ran || h->ret < 0)
        log_warn("sandbox %s: paused here only, no copy for other nodes: %s", h->id, h->err.msg);
    else
        log_info("sandbox %s: its pause is on shared storage for any node", h->id);
    if (sb && sb->exporting) { /* it may have been deleted meanwhile */
        sb->exporting = false;
        sandbox_op_finish(sb, NULL); /* the pause itself succeeded either way */
    }
    handover_free(h);
}

bool snapshot_export_start(struct manager *m, struct sandbox *sb)
{
    if (!m->cfg->shared_snapshots)
        return false;
    struct handover *h = sbx_xcalloc(1, sizeof(*h));
    h->m = m;
    snprintf(h->id, sizeof(h->id), "%s", sb->rec.id);
    h->from = sbx_xstrdup(sb->dir);
    h->to = manager_export_dir(m, sb->rec.id);
    h->image = m->ws_template != NULL;
    h->workspace = sbx_xstrdup(sb->workspace);
    h->paused_at = sb->paused_at;
    sb->exporting = true;
    jobs_submit(m->jobs, export_run, export_done, h);
    return true;
}

/* --- adoption, on the node that resumes it ---------------------------------------------- */

static long long stamp_of(const char *dir)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/" EXPORT_STAMP, dir);
    _cleanup_free_ char *text = NULL;
    return sbx_read_file(path, 32, &text, NULL) == 0 ? strtoll(text, NULL, 10) : -1;
}

static void adopt_run(void *data)
{
    struct handover *h = data;
    int r = sbx_mkdir_p(h->workspace, 0755);
    if (r < 0) {
        h->ret = sbx_err_sys(&h->err, -r, "creating %s", h->workspace);
        return;
    }
    if (h->image) {
        _cleanup_free_ char *src = sbx_xasprintf("%s/workspace.img", h->from);
        _cleanup_free_ char *img = sbx_xasprintf("%s/workspace.img", h->to);
        h->ret = wsimage_mount(src, img, h->workspace, &h->err);
    } else {
        _cleanup_free_ char *src = sbx_xasprintf("%s/workspace", h->from);
        h->ret = copy_dir(src, h->workspace, &h->err);
    }
    _cleanup_free_ char *mem_from = sbx_xasprintf("%s/memory", h->from);
    _cleanup_free_ char *mem_to = sbx_xasprintf("%s/snapshots/memory", h->to);
    if (h->ret == 0)
        h->ret = copy_dir(mem_from, mem_to, &h->err);
}

static void adopt_done(void *data, bool ran)
{
    struct handover *h = data;
    struct manager *m = h->m;
    if (!ran && h->ret == 0)
        h->ret = sbx_err_set(&h->err, ECANCELED, "internal", "sbxd stopped first");
    struct sandbox *sb = NULL;
    if (h->ret == 0) {
        log_info("sandbox %s: taken over from node %s, paused", h->id, h->rec.node_id);
        snprintf(h->rec.node_id, sizeof(h->rec.node_id), "%s", store_node(m->store));
        sb = sandbox_from_record(m, &h->rec);
        sandbox_keep_paused(m, sb);
        (void)sbx_rm_rf(h->from); /* it is this node's now: the export is spent */
    } else {
        /* Given back: its own node resumes it when it returns. */
        struct sbx_err e2 = {0};
        if (store_sandbox_move(m->store, h->id, store_node(m->store), h->rec.node_id, &e2) < 0)
            log_error("sandbox %s: giving it back to node %s: %s", h->id, h->rec.node_id,
                      e2.msg);
        (void)sbx_umount_beneath(h->to);
        (void)sbx_rm_rf(h->to);
        log_warn("sandbox %s: could not take it over: %s", h->id, h->err.msg);
        snprintf(h->err.code, sizeof(h->err.code), "node_unreachable");
    }
    h->cb(sb, h->ret < 0 ? &h->err : NULL, h->data);
    handover_free(h);
}

int snapshot_adopt(struct manager *m, const struct store_sandbox *rec, snapshot_adopt_fn cb,
                   void *data, struct sbx_err *err)
{
    _cleanup_free_ char *dir = manager_export_dir(m, rec->id);
    char at[24];
    if (!dir || strcmp(rec->status, SANDBOX_PAUSED) ||
        store_meta_get(m->store, rec->id, STORE_META_PAUSED_AT, at, sizeof(at), NULL) < 0 ||
        stamp_of(dir) != strtoll(at, NULL, 10))
        return sbx_err_set(err, ENOENT, "node_unreachable",
                           "sandbox %s is paused on node %s, which has not been heard from, and "
                           "no copy of that pause is on shared storage",
                           rec->id, rec->node_id);
    int r = store_sandbox_move(m->store, rec->id, rec->node_id, store_node(m->store), err);
    if (r < 0)
        return r;
    struct handover *h = sbx_xcalloc(1, sizeof(*h));
    h->m = m;
    snprintf(h->id, sizeof(h->id), "%s", rec->id);
    h->from = TAKE_PTR(dir);
    h->to = sbx_xasprintf("%s/sandboxes/%s", m->cfg->data_dir, rec->id);
    h->workspace = sbx_xasprintf("%s/workspace", h->to);
    h->image = m->ws_template != NULL;
    h->rec = *rec;
    h->rec.env_json = sbx_xstrdup(rec->env_json ? rec->env_json : "{}");
    h->cb = cb;
    h->data = data;
    jobs_submit(m->jobs, adopt_run, adopt_done, h);
    return 0;
}
