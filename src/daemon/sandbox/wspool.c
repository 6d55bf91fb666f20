#include "wspool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/log.h"
#include "../../common/mounts.h"
#include "../../common/util.h"
#include "wsimage.h"

struct wsentry {
    struct wspool *pool;
    char *img, *mnt;
    int ret;
    struct sbx_err err;
    struct wsentry *next;
};

struct wspool {
    struct jobs *jobs; /* the manager's */
    char *dir, *template_path;
    unsigned long long seq;
    struct wsentry *ready;
    int pending;
    bool broken;
};

static void entry_drop(struct wsentry *e)
{
    if (e->mnt) {
        (void)sbx_umount_beneath(e->mnt);
        (void)rmdir(e->mnt);
    }
    if (e->img)
        (void)unlink(e->img);
    free(e->img);
    free(e->mnt);
    free(e);
}

/* On a worker: the slow part of a create's workspace. */
static void fill_run(void *data)
{
    struct wsentry *e = data;
    if (mkdir(e->mnt, 0700) < 0) {
        e->ret = sbx_err_sys(&e->err, errno, "creating %s", e->mnt);
        return;
    }
    e->ret = wsimage_mount(e->pool->template_path, e->img, e->mnt, &e->err);
}

static void fill_done(void *data, bool ran)
{
    struct wsentry *e = data;
    struct wspool *p = e->pool;
    p->pending--;
    if (!ran || e->ret < 0) {
        /* A failing pool stops refilling; creates make their images themselves. */
        if (ran && !p->broken)
            log_warn("workspace pool: %s; creates clone their images themselves", e->err.msg);
        p->broken = p->broken || ran;
        entry_drop(e);
        return;
    }
    e->next = p->ready;
    p->ready = e;
}

static void refill(struct wspool *p)
{
    int have = p->pending;
    for (struct wsentry *e = p->ready; e; e = e->next)
        have++;
    for (; !p->broken && have < WSPOOL_SIZE; have++) {
        struct wsentry *e = sbx_xcalloc(1, sizeof(*e));
        e->pool = p;
        e->img = sbx_xasprintf("%s/%llu.img", p->dir, p->seq);
        e->mnt = sbx_xasprintf("%s/%llu", p->dir, p->seq);
        p->seq++;
        p->pending++;
        jobs_submit(p->jobs, fill_run, fill_done, e);
    }
}

int wspool_new(struct jobs *j, const char *data_dir, const char *template_path, struct wspool **out,
               struct sbx_err *err)
{
    _cleanup_free_ char *dir = sbx_xasprintf("%s/wspool", data_dir);
    (void)sbx_umount_beneath(dir);
    int r = sbx_rm_rf(dir);
    if (r < 0 && r != -ENOENT)
        return sbx_err_sys(err, -r, "clearing %s", dir);
    if ((r = sbx_mkdir_p(dir, 0700)) < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    struct wspool *p = sbx_xcalloc(1, sizeof(*p));
    p->jobs = j;
    p->dir = TAKE_PTR(dir);
    p->template_path = sbx_xstrdup(template_path);
    refill(p);
    *out = p;
    return 0;
}

int wspool_take(struct wspool *p, const char *image, const char *mountpoint, struct sbx_err *err)
{
    struct wsentry *e = p ? p->ready : NULL;
    if (!e)
        return -ENOENT;
    p->ready = e->next;
    /* A bind keeps the mount's nosuid,nodev; the pool's own mount then goes lazily. */
    int r = 0;
    if (mount(e->mnt, mountpoint, NULL, MS_BIND, NULL) < 0)
        r = sbx_err_sys(err, errno, "mounting %s on %s", e->mnt, mountpoint);
    else if (rename(e->img, image) < 0)
        r = sbx_err_sys(err, errno, "moving %s to %s", e->img, image);
    if (r == 0) {
        (void)umount2(e->mnt, MNT_DETACH);
        (void)rmdir(e->mnt);
        free(e->img);
        e->img = NULL;
        free(e->mnt);
        e->mnt = NULL;
    } else {
        (void)umount2(mountpoint, MNT_DETACH);
    }
    entry_drop(e);
    refill(p);
    return r;
}

void wspool_free(struct wspool *p)
{
    if (!p)
        return;
    while (p->ready) {
        struct wsentry *e = p->ready;
        p->ready = e->next;
        entry_drop(e);
    }
    (void)sbx_rm_rf(p->dir);
    free(p->dir);
    free(p->template_path);
    free(p);
}
