#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/sbxuser.h"
#include "../../common/text.h"
#include "../../common/util.h"

#define WS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* openat2 answers EAGAIN when a concurrent rename could have let ".." escape; the
 * sandbox can provoke that at will, so retry a bounded number of times. */
#define WS_EAGAIN_RETRIES 64
#define WS_HASH_BUF (256u * 1024u)
#define WS_DIR_ENTRIES_MAX 200000u
/* Start writeback every so often while a large file is written, so that the fsync
 * before its rename has little left to do. */
#define WS_WRITEBACK_EVERY (8u * 1024u * 1024u)

int ws_name_check(const char *path, bool allow_empty, struct sbx_err *err)
{
    size_t n = strlen(path);
    if (n == 0) {
        if (allow_empty)
            return 0;
        return sbx_err_set(err, EINVAL, "invalid_path", "the path is empty");
    }
    if (n > WS_PATH_MAX)
        return sbx_err_set(err, ENAMETOOLONG, "invalid_path", "the path is longer than %d bytes",
                           WS_PATH_MAX);
    if (path[0] == '/')
        return sbx_err_set(err, EINVAL, "invalid_path",
                           "paths are relative to /workspace, not absolute");
    const char *c = path;
    while (*c) {
        const char *e = strchrnul(c, '/');
        size_t len = (size_t)(e - c);
        if (len == 0)
            return sbx_err_set(err, EINVAL, "invalid_path", "the path has an empty component");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return sbx_err_set(err, EINVAL, "invalid_path",
                               "\".\" and \"..\" are not allowed in paths");
        if (len > WS_NAME_MAX)
            return sbx_err_set(err, ENAMETOOLONG, "invalid_path",
                               "a path component is longer than %d bytes", WS_NAME_MAX);
        if (!*e)
            break;
        c = e + 1;
        if (!*c)
            return sbx_err_set(err, EINVAL, "invalid_path", "the path ends with '/'");
    }
    return 0;
}

int ws_path_check(const char *path, bool allow_empty, struct sbx_err *err)
{
    int r = ws_name_check(path, allow_empty, err);
    if (r < 0)
        return r;
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return sbx_err_set(err, EINVAL, "invalid_path",
                               "the path contains a control character or NUL");
    if (!sbx_utf8_valid(path, strlen(path)))
        return sbx_err_set(err, EINVAL, "invalid_path", "the path is not valid UTF-8");
    return 0;
}

static int path_errno(struct sbx_err *err, int e, const char *path)
{
    switch (e) {
    case EXDEV:
    case ELOOP:
        return sbx_err_set(err, e, "invalid_path", "%.200s resolves outside the workspace", path);
    case ENAMETOOLONG:
    case EINVAL:
        return sbx_err_set(err, e, "invalid_path", "%.200s is not a valid path", path);
    case ENOENT:
    case ENOTDIR:
        return sbx_err_set(err, e, "file_not_found", "%.200s does not exist", path);
    case EISDIR:
    case ENOTEMPTY:
    case EEXIST:
        return sbx_err_set(err, e, "invalid_path", "%.200s is a directory", path);
    case ENOSPC:
    case EDQUOT:
        return sbx_err_set(err, e, "workspace_too_large", "the workspace is full");
    default:
        return sbx_err_sys(err, e, "%.200s", path);
    }
}

static int openat2_beneath(int dir, const char *path, int flags, mode_t mode, uint64_t resolve)
{
    struct open_how how = {
        .flags = (uint64_t)flags | O_CLOEXEC,
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = resolve,
    };
    if (!(flags & O_PATH))
        how.flags |= O_NONBLOCK;
    for (int i = 0; i < WS_EAGAIN_RETRIES; i++) {
        long fd = syscall(SYS_openat2, dir, *path ? path : ".", &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
    }
    return -EAGAIN;
}

int ws_open_root(const char *workspace_dir, int *out, struct sbx_err *err)
{
    int fd = open(workspace_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening the workspace %s", workspace_dir);
    *out = fd;
    return 0;
}

int ws_open(int root, const char *path, int flags, int *out, struct sbx_err *err)
{
    int fd = openat2_beneath(root, path, flags, 0, WS_RESOLVE);
    if (fd < 0)
        return path_errno(err, -fd, path);
    *out = fd;
    return 0;
}

/* A file replaced or removed through sbxd has its blocks given back by truncation
 * (truncate_unless_read). A reader of sbxd's holds a shared flock on the file so that this
 * skips what it is still sending or hashing; the size it reports is read under the lock.
 * flock is sbxd's alone: gVisor keeps the sandbox's locks inside its sentry. */
static int hold_shared(int fd)
{
    while (flock(fd, LOCK_SH) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

/* Truncate a regular file shown by at most nlink_max names, unless a reader holds it. */
static void truncate_unless_read(int fd, nlink_t nlink_max)
{
    struct stat st;
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
        return;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink <= nlink_max)
        (void)ftruncate(fd, 0);
    (void)flock(fd, LOCK_UN);
}

int ws_open_file(int root, const char *path, int *out, uint64_t *size, struct sbx_err *err)
{
    _cleanup_close_ int fd = -1;
    struct stat st;
    /* A file replaced between the open and the lock may have been truncated: the name
     * now shows its successor, so open that instead. */
    for (int i = 0; fd < 0; i++) {
        _cleanup_close_ int f = -1;
        int r = ws_open(root, path, O_RDONLY, &f, err);
        if (r < 0)
            return r;
        if (fstat(f, &st) < 0)
            return sbx_err_sys(err, errno, "stat %.200s", path);
        if (S_ISREG(st.st_mode) && ((r = hold_shared(f)) < 0 || fstat(f, &st) < 0))
            return sbx_err_sys(err, r < 0 ? -r : errno, "locking %.200s", path);
        if (!S_ISREG(st.st_mode) || st.st_nlink > 0 || i == WS_EAGAIN_RETRIES)
            fd = TAKE_FD(f);
    }
    if (S_ISDIR(st.st_mode))
        return sbx_err_set(err, EISDIR, "invalid_path", "%.200s is a directory", path);
    if (!S_ISREG(st.st_mode))
        return sbx_err_set(err, EINVAL, "invalid_path", "%.200s is not a regular file", path);
    /* Reads must block normally once we know it is a plain file. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return sbx_err_sys(err, errno, "fcntl %.200s", path);
    *size = (uint64_t)st.st_size;
    *out = TAKE_FD(fd);
    return 0;
}

/* The directory part of path ("" for a top-level name) and its last component. */
static int split_path(const char *path, char dir[WS_PATH_MAX + 1], const char **name)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        dir[0] = '\0';
        *name = path;
        return 0;
    }
    size_t n = (size_t)(slash - path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    *name = slash + 1;
    return 0;
}

/* What sbxd creates in a workspace belongs to the sandbox's user, who owns /workspace
 * (docs/security.md). A daemon that is not root cannot give it away (EPERM): the entry
 * then stays its own, which is who the commands run as on such a host. */
static void give_to_user(int fd)
{
    (void)fchown(fd, SBX_USER_UID, SBX_USER_GID);
}

/* Open (and create) each directory of dir in turn. Every step is resolved beneath
 * the step before, which is beneath root. */
static int mkdirs_beneath(int root, const char *dir, int *out, struct sbx_err *err)
{
    _cleanup_close_ int cur = openat2_beneath(root, "", O_RDONLY | O_DIRECTORY, 0, WS_RESOLVE);
    if (cur < 0)
        return path_errno(err, -cur, dir);
    char comp[WS_NAME_MAX + 1];
    const char *c = dir;
    while (*c) {
        const char *e = strchrnul(c, '/');
        size_t len = (size_t)(e - c);
        memcpy(comp, c, len);
        comp[len] = '\0';
        bool made = mkdirat(cur, comp, 0755) == 0;
        if (!made && errno != EEXIST)
            return path_errno(err, errno, dir);
        int next = openat2_beneath(cur, comp, O_RDONLY | O_DIRECTORY, 0, WS_RESOLVE);
        if (next < 0)
            return path_errno(err, -next, dir);
        if (made)
            give_to_user(next);
        close(cur);
        cur = next;
        c = *e ? e + 1 : e;
    }
    *out = TAKE_FD(cur);
    return 0;
}

static int open_parent(int root, const char *path, bool create, int *dirfd, const char **name,
                       struct sbx_err *err)
{
    char dir[WS_PATH_MAX + 1];
    split_path(path, dir, name);
    int fd = openat2_beneath(root, dir, O_RDONLY | O_DIRECTORY, 0, WS_RESOLVE);
    if (fd == -ENOENT && create)
        return mkdirs_beneath(root, dir, dirfd, err);
    if (fd < 0)
        return path_errno(err, -fd, *dir ? dir : path);
    *dirfd = fd;
    return 0;
}

/* The sandbox may remove a directory while we write into it: the kernel then refuses
 * new entries there (EPERM, ENOENT), which is the client's "not found", not ours. */
static bool dir_removed(int dir)
{
    struct stat st;
    return fstat(dir, &st) == 0 && st.st_nlink == 0;
}

static int writer_open(int root, const char *path, mode_t mode, struct ws_writer *w,
                       struct sbx_err *err);

int ws_writer_open(int root, const char *path, mode_t mode, struct ws_writer *w,
                   struct sbx_err *err)
{
    w->dir = w->fd = -1;
    int r = ws_path_check(path, false, err);
    return r < 0 ? r : writer_open(root, path, mode, w, err);
}

int ws_writer_open_any(int root, const char *path, mode_t mode, struct ws_writer *w,
                       struct sbx_err *err)
{
    w->dir = w->fd = -1;
    int r = ws_name_check(path, false, err);
    return r < 0 ? r : writer_open(root, path, mode, w, err);
}

static int writer_open(int root, const char *path, mode_t mode, struct ws_writer *w,
                       struct sbx_err *err)
{
    w->written = w->unflushed = 0;
    int r;
    const char *name;
    r = open_parent(root, path, true, &w->dir, &name, err);
    if (r < 0)
        return r;
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->fd = openat(w->dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (w->fd < 0) {
        r = dir_removed(w->dir) ? path_errno(err, ENOENT, path) : path_errno(err, errno, path);
        ws_writer_close(w);
        return r;
    }
    give_to_user(w->fd);
    return 0;
}

int ws_writer_write(struct ws_writer *w, const void *buf, size_t len, struct sbx_err *err)
{
    int r = sbx_write_all(w->fd, buf, len);
    if (r < 0)
        return path_errno(err, -r, w->name);
    w->written += len;
    w->unflushed += len;
    if (w->unflushed >= WS_WRITEBACK_EVERY) {
        (void)sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        w->unflushed = 0;
    }
    return 0;
}

static void release_blocks(int dir, const char *name);

int ws_writer_commit(struct ws_writer *w, bool sync, struct sbx_err *err)
{
    if (sync && fsync(w->fd) < 0)
        return path_errno(err, errno, w->name);
    /* Link under a random temporary name, then rename over the target: rename replaces
     * a symlink or file of that name itself and never follows it. */
    char tmp[48];
    int r = -EEXIST;
    for (int i = 0; i < 8 && r == -EEXIST; i++) {
        sbx_random_id(WS_TMP_PREFIX, 8, tmp, sizeof(tmp));
        r = linkat(w->fd, "", w->dir, tmp, AT_EMPTY_PATH) < 0 ? -errno : 0;
    }
    if (r < 0 && dir_removed(w->dir))
        return sbx_err_set(err, ENOENT, "file_not_found",
                           "the directory of %.200s was removed during the upload", w->name);
    if (r < 0)
        return path_errno(err, -r, w->name);
    /* The file being replaced, to give its blocks back once no name shows it. */
    _cleanup_close_ int old =
        openat(w->dir, w->name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (renameat(w->dir, tmp, w->dir, w->name) < 0) {
        r = path_errno(err, errno, w->name);
        (void)unlinkat(w->dir, tmp, 0);
        return r;
    }
    truncate_unless_read(old, 0);
    if (sync && fsync(w->dir) < 0)
        return path_errno(err, errno, w->name);
    return 0;
}

void ws_writer_close(struct ws_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->dir >= 0)
        close(w->dir);
    w->fd = w->dir = -1;
}

int ws_write_file(int root, const char *path, const void *buf, size_t len, mode_t mode,
                  struct sbx_err *err)
{
    struct ws_writer w;
    int r = ws_writer_open(root, path, mode, &w, err);
    if (r == 0)
        r = ws_writer_write(&w, buf, len, err);
    if (r == 0)
        r = ws_writer_commit(&w, false, err);
    ws_writer_close(&w);
    return r;
}

/* gVisor keeps host fds of files the sandbox has used, so an unlink from the host side
 * would not give the space back to the quota until it lets go. Truncating first does,
 * unless another name (hard link) still shows the content. */
static void release_blocks(int dir, const char *name)
{
    _cleanup_close_ int fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    truncate_unless_read(fd, 1);
}

static int release_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    if (e->type == WS_FILE)
        release_blocks(e->dir, e->name);
    return 0;
}

int ws_remove(int root, const char *path, struct sbx_err *err)
{
    int r = ws_path_check(path, false, err);
    if (r < 0)
        return r;
    _cleanup_close_ int dir = -1;
    const char *name;
    r = open_parent(root, path, false, &dir, &name, err);
    if (r < 0)
        return r;
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return path_errno(err, errno, path);
    if (S_ISDIR(st.st_mode)) {
        (void)ws_walk(root, path, true, SIZE_MAX, release_entry, NULL, NULL, NULL);
        r = sbx_rm_rf_at(dir, name);
    } else {
        if (S_ISREG(st.st_mode))
            release_blocks(dir, name);
        r = unlinkat(dir, name, 0) < 0 ? -errno : 0;
    }
    if (r < 0 && r != -ENOENT)
        return path_errno(err, -r, path);
    return 0;
}

static bool is_upload_tmp(const char *name)
{
    size_t n = strlen(WS_TMP_PREFIX);
    if (strncmp(name, WS_TMP_PREFIX, n) || strlen(name + n) != 16)
        return false;
    return strspn(name + n, "0123456789abcdef") == 16;
}

static int sweep_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    if (e->type == WS_FILE && is_upload_tmp(e->name)) {
        release_blocks(e->dir, e->name);
        if (unlinkat(e->dir, e->name, 0) == 0)
            ++*(long long *)data;
    }
    return 0;
}

long long ws_sweep_uploads(int root, size_t max)
{
    long long removed = 0;
    (void)ws_walk(root, "", true, max, sweep_entry, &removed, NULL, NULL);
    return removed;
}

enum ws_type ws_type_of(mode_t mode)
{
    return S_ISREG(mode) ? WS_FILE : S_ISDIR(mode) ? WS_DIR : S_ISLNK(mode) ? WS_SYMLINK : WS_OTHER;
}

const char *ws_type_name(enum ws_type t)
{
    switch (t) {
    case WS_FILE:
        return "file";
    case WS_DIR:
        return "directory";
    case WS_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

/* --- walk --------------------------------------------------------------------------- */

struct walk {
    ws_walk_fn fn;
    void *data;
    size_t max, count;
    bool recursive;
    bool truncated;
    char path[WS_PATH_MAX + WS_NAME_MAX + 2];
};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The names in dirfd, sorted. */
static int read_names(int dirfd, char ***out, size_t *count, bool *truncated, struct sbx_err *err)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening a directory");
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return sbx_err_sys(err, e, "reading a directory");
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n == WS_DIR_ENTRIES_MAX) {
            *truncated = true;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            names = sbx_xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = sbx_xstrdup(de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), cmp_names);
    *out = names;
    *count = n;
    return 0;
}

static int walk_dir(struct walk *w, int dirfd, size_t plen, unsigned depth, struct sbx_err *err)
{
    char **names = NULL;
    size_t n = 0;
    int r = read_names(dirfd, &names, &n, &w->truncated, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        struct stat st;
        if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed meanwhile */
        if (w->count == w->max) {
            w->truncated = true;
            r = 1;
            break;
        }
        size_t nl = strlen(names[i]);
        if (plen + 1 + nl >= sizeof(w->path)) {
            w->truncated = true;
            continue;
        }
        size_t at = plen;
        if (plen)
            w->path[at++] = '/';
        memcpy(w->path + at, names[i], nl + 1);
        struct ws_entry e = {
            .path = w->path,
            .type = ws_type_of(st.st_mode),
            .size = (uint64_t)st.st_size,
            .mode = st.st_mode & 07777,
            .mtime = (int64_t)st.st_mtim.tv_sec,
            .dir = dirfd,
            .name = names[i],
            .st = &st,
        };
        w->count++;
        r = w->fn(&e, w->data, err);
        if (r != 0)
            break;
        if (e.type == WS_DIR && w->recursive) {
            if (depth + 1 >= WS_WALK_DEPTH_MAX) {
                w->truncated = true;
                continue;
            }
            /* O_NOFOLLOW: a directory swapped for a symlink since the stat is skipped. */
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                continue;
            r = walk_dir(w, sub, at + nl, depth + 1, err);
            close(sub);
        }
        w->path[plen] = '\0';
    }
    free_names(names, n);
    return r;
}

int ws_walk(int root, const char *dir, bool recursive, size_t max, ws_walk_fn fn, void *data,
            bool *truncated, struct sbx_err *err)
{
    int r = ws_path_check(dir, true, err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = -1;
    r = ws_open(root, dir, O_RDONLY, &fd, err);
    if (r < 0)
        return r;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sbx_err_sys(err, errno, "stat %.200s", dir);
    if (!S_ISDIR(st.st_mode))
        return sbx_err_set(err, ENOTDIR, "invalid_path", "%.200s is not a directory", dir);
    struct walk *w = sbx_xcalloc(1, sizeof(*w));
    w->fn = fn;
    w->data = data;
    w->max = max;
    w->recursive = recursive;
    size_t plen = strlen(dir);
    memcpy(w->path, dir, plen + 1);
    r = walk_dir(w, fd, plen, 0, err);
    if (truncated)
        *truncated = w->truncated;
    free(w);
    return r < 0 ? r : 0;
}

/* --- hashing -------------------------------------------------------------------------- */

int ws_sha256_fd(int fd, int copy_to, char hex[WS_SHA256_HEX_LEN + 1], uint64_t *size,
                 struct sbx_err *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        abort();
    _cleanup_free_ unsigned char *buf = sbx_xmalloc(WS_HASH_BUF);
    uint64_t total = 0;
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf, WS_HASH_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = sbx_err_sys(err, errno, "reading a file to hash it");
            break;
        }
        if (n == 0)
            break;
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        if (copy_to >= 0 && (r = sbx_write_all(copy_to, buf, (size_t)n)) < 0) {
            sbx_err_sys(err, -r, "writing a copy of a file");
            break;
        }
        total += (uint64_t)n;
    }
    unsigned char md[32];
    unsigned mdlen = 0;
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (r < 0)
        return r;
    sbx_hex(md, sizeof(md), hex);
    if (size)
        *size = total;
    return 0;
}

int ws_sha256_final(EVP_MD_CTX *md, char hex[WS_SHA256_HEX_LEN + 1], struct sbx_err *err)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(md, d, &dlen) != 1 || dlen != 32)
        return sbx_err_set(err, EIO, "internal", "SHA-256 failed");
    sbx_hex(d, dlen, hex);
    return 0;
}

void ws_sha256_buf(const void *buf, size_t len, char hex[WS_SHA256_HEX_LEN + 1])
{
    unsigned char md[32];
    unsigned mdlen = 0;
    if (EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) != 1)
        abort();
    sbx_hex(md, sizeof(md), hex);
}

struct hash_tree {
    ws_file_fn fn;
    void *data;
    size_t max, count;
    bool truncated;
};

static int hash_one(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct hash_tree *h = data;
    if (e->type != WS_FILE)
        return 0;
    if (h->count == h->max) {
        h->truncated = true;
        return 1;
    }
    _cleanup_close_ int fd =
        openat(e->dir, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || hold_shared(fd) < 0)
        return 0; /* replaced since the walk saw it */
    struct ws_file f = {
        .path = e->path, .mode = st.st_mode & 07777, .mtime = (int64_t)st.st_mtim.tv_sec};
    int r = ws_sha256_fd(fd, -1, f.sha256, &f.size, err);
    if (r < 0)
        return r;
    h->count++;
    return h->fn(&f, h->data, err);
}

int ws_hash_tree(int root, const char *dir, size_t max, ws_file_fn fn, void *data, bool *truncated,
                 struct sbx_err *err)
{
    struct hash_tree h = {.fn = fn, .data = data, .max = max};
    bool walk_trunc = false;
    struct sbx_err lerr = {0};
    int r = ws_walk(root, dir, true, SIZE_MAX, hash_one, &h, &walk_trunc, &lerr);
    if (r < 0 && !strcmp(lerr.code, "file_not_found"))
        r = 0;
    else if (r < 0 && err)
        *err = lerr;
    if (truncated)
        *truncated = h.truncated || walk_trunc;
    return r;
}

int ws_hash_at(int dir, const char *name, char hex[WS_SHA256_HEX_LEN + 1], uint64_t *size,
               struct sbx_err *err)
{
    _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening %s", name);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return sbx_err_set(err, EINVAL, "internal", "%s is not a regular file", name);
    int r = hold_shared(fd);
    if (r < 0)
        return sbx_err_sys(err, -r, "locking %s", name);
    return ws_sha256_fd(fd, -1, hex, size, err);
}

int ws_lstat(int root, const char *path, struct stat *st, char *target, size_t cap,
             struct sbx_err *err)
{
    int r = ws_path_check(path, true, err);
    if (r < 0)
        return r;
    if (target && cap)
        target[0] = '\0';
    if (!*path)
        return fstat(root, st) < 0 ? sbx_err_sys(err, errno, "stat of the workspace") : 0;
    _cleanup_close_ int dir = -1;
    const char *name;
    if ((r = open_parent(root, path, false, &dir, &name, err)) < 0)
        return r;
    if (fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return path_errno(err, errno, path);
    if (S_ISLNK(st->st_mode) && target && cap) {
        ssize_t n = readlinkat(dir, name, target, cap - 1);
        target[n > 0 ? n : 0] = '\0';
    }
    return 0;
}


int ws_mkdirs(int root, const char *path, bool *created, struct sbx_err *err)
{
    struct stat st;
    int r = ws_lstat(root, path, &st, NULL, 0, err);
    if (r == 0) {
        *created = false;
        return S_ISDIR(st.st_mode) ? 0
                                   : sbx_err_set(err, EEXIST, "invalid_path",
                                                 "%.200s exists and is not a directory", path);
    }
    if (strcmp(err->code, "file_not_found"))
        return r;
    _cleanup_close_ int fd = -1;
    if ((r = mkdirs_beneath(root, path, &fd, err)) < 0)
        return r;
    *created = true;
    return 0;
}
