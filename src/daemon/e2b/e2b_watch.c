/* envd's filesystem.Filesystem/WatchDir: inotify on the host side of the workspace. The
 * sandbox's writes reach the workspace's host directory through gVisor's gofer, so the host
 * kernel reports them. Each directory is opened beneath the workspace fd (files/workspace.c)
 * and watched through its /proc/self/fd link, so no watch ever lands outside the workspace,
 * whatever the sandbox does to the tree. One stream: {"start":{}} once the watches are
 * armed, a {"filesystem": {name, type[, entry]}} per event (name relative to the watched
 * directory, one event per kind as fsnotify splits them), {"keepalive":{}} when quiet. It
 * ends when the client leaves, at Connect-Timeout-Ms, or when the directory goes away. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/loop.h"
#include "../../common/util.h"
#include "../files/workspace.h"
#include "../sbxd.h"
#include "e2b.h"
#include "e2b_connect.h"
#include "envd.h"

/* Directories one recursive watch follows, and watch streams open at once (each holds an
 * inotify instance, of which a user has 128 by default). */
#define WATCH_DIRS_MAX 1024
#define WATCH_STREAMS_MAX 32
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |                 \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

static unsigned watch_streams; /* open in this daemon */

struct watch_dir {
    int wd;
    char *rel; /* beneath the watched directory ("" for itself) */
};

struct watch {
    struct sbxd *d;
    struct rpc_stream *out;
    int ifd;
    /* The workspace dir, opened only while needed: a held fd would keep a destroyed
     * sandbox's lazily detached workspace alive. */
    char *workspace;
    struct loop_watch *lw;
    struct loop_timer *deadline;
    char base[WS_PATH_MAX + 1]; /* the watched directory, workspace-relative */
    bool recursive, include_entry;
    struct watch_dir dirs[WATCH_DIRS_MAX];
    size_t ndirs;
};

static void watch_free(struct watch *w)
{
    if (w->deadline)
        loop_timer_cancel(w->d->loop, w->deadline);
    if (w->lw)
        loop_watch_del(w->d->loop, w->lw);
    if (w->ifd >= 0)
        close(w->ifd);
    free(w->workspace);
    for (size_t i = 0; i < w->ndirs; i++)
        free(w->dirs[i].rel);
    free(w);
    watch_streams--;
}

static void watch_end(struct watch *w, const char *code, const char *msg)
{
    rpc_stream_end(w->out, code, msg);
    watch_free(w);
}

/* Watch base/rel, opened beneath the workspace. */
static int add_dir(struct watch *w, const char *rel, struct sbx_err *err)
{
    if (w->ndirs == WATCH_DIRS_MAX)
        return sbx_err_set(err, ENOSPC, "too_many_watched_dirs",
                           "a watch follows at most %d directories", WATCH_DIRS_MAX);
    _cleanup_free_ char *path =
        *rel ? (*w->base ? sbx_xasprintf("%s/%s", w->base, rel) : sbx_xstrdup(rel))
             : sbx_xstrdup(w->base);
    _cleanup_close_ int root = -1, fd = -1;
    int r = ws_open_root(w->workspace, &root, err);
    if (r < 0 || (r = ws_open(root, path, O_RDONLY | O_DIRECTORY, &fd, err)) < 0)
        return r;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->ifd, link, WATCH_MASK);
    if (wd < 0)
        return sbx_err_sys(err, errno, "watching %.200s", path);
    w->dirs[w->ndirs++] = (struct watch_dir){.wd = wd, .rel = sbx_xstrdup(rel)};
    return 0;
}

struct walk_ctx {
    struct watch *w;
    size_t skip; /* strlen of base + "/" */
};

static int add_walked(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct walk_ctx *c = data;
    if (e->type != WS_DIR)
        return 0;
    return add_dir(c->w, e->path + c->skip, err) < 0 ? -1 : 0;
}

static const char *event_type(uint32_t mask)
{
    if (mask & (IN_CREATE | IN_MOVED_TO))
        return "EVENT_TYPE_CREATE";
    if (mask & IN_MODIFY)
        return "EVENT_TYPE_WRITE";
    if (mask & IN_DELETE)
        return "EVENT_TYPE_REMOVE";
    if (mask & IN_MOVED_FROM)
        return "EVENT_TYPE_RENAME";
    if (mask & IN_ATTRIB)
        return "EVENT_TYPE_CHMOD";
    return NULL;
}

static json_t *entry_of(struct watch *w, const char *name)
{
    _cleanup_free_ char *path =
        *w->base ? sbx_xasprintf("%s/%s", w->base, name) : sbx_xstrdup(name);
    struct stat st;
    struct sbx_err err = {0};
    _cleanup_close_ int root = -1;
    if (ws_open_root(w->workspace, &root, &err) < 0 || ws_lstat(root, path, &st, NULL, 0, &err) < 0)
        return NULL;
    return e2b_entry_json(path, &st, NULL);
}

static void on_event(struct watch *w, const struct inotify_event *ev)
{
    if (ev->mask & (IN_IGNORED | IN_UNMOUNT))
        return;
    const struct watch_dir *dir = NULL;
    for (size_t i = 0; i < w->ndirs && !dir; i++)
        if (w->dirs[i].wd == ev->wd)
            dir = &w->dirs[i];
    const char *type = event_type(ev->mask);
    /* Our own writer's temporary names (files.write) are not the user's files. */
    if (!dir || !type || !ev->len || !strncmp(ev->name, WS_TMP_PREFIX, strlen(WS_TMP_PREFIX)))
        return;
    _cleanup_free_ char *name =
        *dir->rel ? sbx_xasprintf("%s/%s", dir->rel, ev->name) : sbx_xstrdup(ev->name);
    json_t *fe = json_pack("{s:s,s:s}", "name", name, "type", type);
    if (w->include_entry && (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB))) {
        json_t *e = entry_of(w, name);
        if (e)
            json_object_set_new(fe, "entry", e);
    }
    rpc_stream_send(w->out, json_pack("{s:o}", "filesystem", fe));
    struct sbx_err err = {0};
    if (w->recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
        (void)add_dir(w, name, &err); /* past the bound, deeper events are not reported */
}

static void on_readable(struct loop *l, int fd, uint32_t events, void *data)
{
    struct watch *w = data;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool gone = false;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if ((ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) &&
                w->ndirs && ev->wd == w->dirs[0].wd)
                gone = true;
            else
                on_event(w, ev);
            p += sizeof(*ev) + ev->len;
        }
    }
    if (gone)
        watch_end(w, NULL, NULL);
}

static void on_deadline(struct loop *l, void *data)
{
    struct watch *w = data;
    w->deadline = NULL;
    watch_end(w, NULL, NULL);
}

static void on_gone(void *data)
{
    struct watch *w = data;
    w->out = NULL; /* freed by the stream */
    watch_free(w);
}

void envd_watch(const struct envd_ctx *c, json_t *msg)
{
    struct sbx_err err = {0};
    struct watch *w = sbx_xcalloc(1, sizeof(*w));
    w->d = c->d;
    w->ifd = -1;
    w->workspace = sbx_xstrdup(c->sb->workspace);
    _cleanup_close_ int root = -1;
    watch_streams++;
    const char *p = json_string_value(json_object_get(msg, "path"));
    w->recursive = json_is_true(json_object_get(msg, "recursive"));
    w->include_entry = json_is_true(json_object_get(msg, "includeEntry")) ||
                       json_is_true(json_object_get(msg, "include_entry"));
    struct stat st;
    if (watch_streams > WATCH_STREAMS_MAX) {
        sbx_err_set(&err, EMFILE, "too_many_watches", "at most %d directory watches at once",
                    WATCH_STREAMS_MAX);
    } else if (!p || !*p) {
        sbx_err_set(&err, EINVAL, "invalid_request", "path is required");
    } else if (e2b_path_to_ws(p, w->base, sizeof(w->base), &err) == 0 &&
               ws_open_root(w->workspace, &root, &err) == 0 &&
               ws_lstat(root, w->base, &st, NULL, 0, &err) == 0) {
        if (!S_ISDIR(st.st_mode))
            sbx_err_set(&err, ENOTDIR, "invalid_request", "path %.200s is not a directory", p);
        else if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
            sbx_err_sys(&err, errno, "inotify");
        else if (add_dir(w, "", &err) == 0 && w->recursive) {
            struct walk_ctx wc = {.w = w, .skip = *w->base ? strlen(w->base) + 1 : 0};
            bool truncated;
            (void)ws_walk(root, w->base, true, WATCH_DIRS_MAX * 16, add_walked, &wc, &truncated,
                          &err);
            err = (struct sbx_err){0}; /* what could not be watched is not reported */
        }
    }
    w->out =
        rpc_stream_begin(c->req, c->d->loop, false, json_pack("{s:{}}", "keepalive"), on_gone, w);
    int r = err.code[0] ? -1 : loop_watch_add(c->d->loop, w->ifd, EPOLLIN, on_readable, w, &w->lw);
    if (r < 0) {
        if (!err.code[0])
            sbx_err_sys(&err, -r, "watching inotify");
        watch_end(w, rpc_code(&err), err.msg);
        return;
    }
    long long ms = rpc_timeout_ms(c->req);
    if (ms > 0)
        w->deadline = loop_timer_add(c->d->loop, ms, on_deadline, w);
    rpc_stream_send(w->out, json_pack("{s:{}}", "start"));
}
