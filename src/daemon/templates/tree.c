#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../../common/spawn.h"
#include "../../common/text.h"
#include "../../common/util.h"

extern char **environ;

/* Run sh -c script with args; success is the script printing "ok". The daemon's SIGCHLD
 * handler reaps every child (main.c), so the exit status may be gone by the time this
 * thread asks: the answer travels on stdout instead. */
static int run_sh(const char *script, const char *a, const char *b, char why[TREE_ERR_MAX])
{
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(errp, O_CLOEXEC) < 0) {
        int e = errno;
        close(out[0]);
        close(out[1]);
        return -e;
    }
    struct sbx_spawn_opts o = {.out = out[1], .err = errp[1], .keep_fd = -1};
    char *argv[] = {"/bin/sh", "-c", (char *)script, "sh", (char *)a, (char *)b, NULL};
    pid_t pid;
    int r = -sbx_spawn(&pid, argv, environ, &o);
    close(out[1]);
    close(errp[1]);
    if (r != 0) {
        close(out[0]);
        close(errp[0]);
        snprintf(why, TREE_ERR_MAX, "starting /bin/sh: %s", strerror(r));
        return -r;
    }
    char ok[8] = "";
    size_t okn = 0;
    for (;;) {
        ssize_t n = read(out[0], ok + okn, sizeof(ok) - 1 - okn);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        okn += (size_t)n;
        if (okn == sizeof(ok) - 1)
            break;
    }
    size_t wn = 0;
    why[0] = '\0';
    for (;;) {
        ssize_t n = read(errp[0], why + wn, TREE_ERR_MAX - 1 - wn);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        wn += (size_t)n;
        if (wn == TREE_ERR_MAX - 1) {
            char sink[4096];
            while (read(errp[0], sink, sizeof(sink)) > 0)
                ;
            break;
        }
    }
    why[sbx_utf8_prefix(why, wn)] = '\0';
    close(out[0]);
    close(errp[0]);
    (void)waitpid(pid, NULL, 0); /* ECHILD when the daemon reaped it first */
    if (strncmp(ok, "ok", 2)) {
        if (!why[0])
            snprintf(why, TREE_ERR_MAX, "failed");
        return -EIO;
    }
    return 0;
}

int tree_remove(const char *path, char why[TREE_ERR_MAX])
{
    return run_sh("rm -rf --one-file-system -- \"$1\" && echo ok", path, "", why);
}

int tree_overlay_mount(const char *lower, const char *dir, char why[TREE_ERR_MAX])
{
    static const char *const sub[] = {"upper", "work", "mnt"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(sub); i++) {
        _cleanup_free_ char *p = sbx_xasprintf("%s/%s", dir, sub[i]);
        if (mkdir(p, 0755) < 0) {
            snprintf(why, TREE_ERR_MAX, "mkdir %s: %s", p, strerror(errno));
            return -errno;
        }
    }
    _cleanup_free_ char *opts = sbx_xasprintf(
        "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,redirect_dir=off,metacopy=off,index=off,"
        "xino=off",
        lower, dir, dir);
    _cleanup_free_ char *mnt = sbx_xasprintf("%s/mnt", dir);
    if (mount("overlay", mnt, "overlay", MS_NODEV, opts) < 0) {
        int e = errno;
        snprintf(why, TREE_ERR_MAX, "mounting the overlay at %s: %s", mnt, strerror(e));
        return -e;
    }
    return 0;
}

int tree_overlay_unmount(const char *dir, int timeout_ms, char why[TREE_ERR_MAX])
{
    _cleanup_free_ char *mnt = sbx_xasprintf("%s/mnt", dir);
    for (int waited = 0;; waited += 100) {
        if (umount2(mnt, 0) == 0 || errno == EINVAL || errno == ENOENT)
            return 0;
        if (errno != EBUSY || waited >= timeout_ms)
            break;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (umount2(mnt, MNT_DETACH) < 0 && errno != EINVAL) {
        snprintf(why, TREE_ERR_MAX, "unmounting %s: %s", mnt, strerror(errno));
        return -errno;
    }
    return 0;
}

static bool is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dirfd, const char *name)
{
    char v[4];
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
    return n > 0 && v[0] == 'y';
}

/* Remove whatever is at dfd/name (a file, a link, a whole tree). */
static int remove_at(int dfd, const char *name, const char *path, char why[TREE_ERR_MAX])
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dfd, name, 0) < 0) {
            snprintf(why, TREE_ERR_MAX, "removing %s: %s", path, strerror(errno));
            return -EIO;
        }
        return 0;
    }
    return tree_remove(path, why);
}

/* Move the changes in upper (dir fd ufd, path upath) onto dst (fd dfd, path dpath). */
static int apply(int ufd, const char *upath, int dfd, const char *dpath, char why[TREE_ERR_MAX])
{
    DIR *d = fdopendir(ufd);
    if (!d) {
        close(ufd);
        snprintf(why, TREE_ERR_MAX, "opening %s: %s", upath, strerror(errno));
        return -EIO;
    }
    int ufd2 = dirfd(d), r = 0;
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *up = sbx_xasprintf("%s/%s", upath, de->d_name);
        _cleanup_free_ char *dp = sbx_xasprintf("%s/%s", dpath, de->d_name);
        struct stat st;
        if (fstatat(ufd2, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            snprintf(why, TREE_ERR_MAX, "stat %s: %s", up, strerror(errno));
            r = -EIO;
            break;
        }
        if (is_whiteout(&st)) {
            r = remove_at(dfd, de->d_name, dp, why);
            continue;
        }
        struct stat dst;
        bool dst_dir =
            fstatat(dfd, de->d_name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(dst.st_mode);
        if (S_ISDIR(st.st_mode) && dst_dir && !is_opaque(ufd2, de->d_name)) {
            /* A directory of lower's with changes inside: its own metadata, then those. */
            int sub_u = openat(ufd2, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int sub_d =
                openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub_u < 0 || sub_d < 0) {
                if (sub_u >= 0)
                    close(sub_u);
                snprintf(why, TREE_ERR_MAX, "opening %s: %s", up, strerror(errno));
                r = -EIO;
                break;
            }
            struct timespec times[2] = {st.st_atim, st.st_mtim};
            if (fchown(sub_d, st.st_uid, st.st_gid) < 0 || fchmod(sub_d, st.st_mode & 07777) < 0 ||
                futimens(sub_d, times) < 0) {
                close(sub_u);
                snprintf(why, TREE_ERR_MAX, "setting %s: %s", dp, strerror(errno));
                r = -EIO;
                break;
            }
            r = apply(sub_u, up, sub_d, dp, why);
            /* Its times again: filling it changed them. */
            if (r == 0)
                (void)futimens(sub_d, times);
            continue;
        }
        /* New, replaced, or an opaque directory: upper's entry takes the path. */
        if ((r = remove_at(dfd, de->d_name, dp, why)) < 0)
            break;
        if (renameat(ufd2, de->d_name, dfd, de->d_name) < 0) {
            snprintf(why, TREE_ERR_MAX, "moving %s: %s", up, strerror(errno));
            r = -EIO;
        }
    }
    closedir(d);
    return r;
}

int tree_merge(const char *lower, const char *dir, const char *dst, char why[TREE_ERR_MAX])
{
    /* Hard links need one filesystem: a parent elsewhere is copied. */
    int r = run_sh("{ cp -al -- \"$1\" \"$2\" 2>/dev/null || "
                   "{ rm -rf -- \"$2\" && cp -a -- \"$1\" \"$2\"; }; } && echo ok",
                   lower, dst, why);
    if (r < 0)
        return r;
    _cleanup_free_ char *upath = sbx_xasprintf("%s/upper", dir);
    int ufd = open(upath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ufd < 0 || dfd < 0) {
        if (ufd >= 0)
            close(ufd);
        snprintf(why, TREE_ERR_MAX, "opening %s: %s", ufd < 0 ? upath : dst, strerror(errno));
        return -EIO;
    }
    struct stat st;
    if (fstat(ufd, &st) == 0) {
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        if (fchown(dfd, st.st_uid, st.st_gid) < 0 || fchmod(dfd, st.st_mode & 07777) < 0)
            snprintf(why, TREE_ERR_MAX, "setting the root's owner and mode: %s", strerror(errno));
        (void)futimens(dfd, times);
    }
    return apply(ufd, upath, dfd, dst, why);
}

struct entries {
    char **v;
    size_t n, cap;
};

static void add(struct entries *e, char *path)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 4096;
        e->v = sbx_xrealloc(e->v, e->cap * sizeof(*e->v));
    }
    e->v[e->n++] = path;
}

/* Every entry below dirfd (rel is its path from the root, "" for the root itself). */
static int walk(int dirfd, const char *rel, struct entries *e, char why[TREE_ERR_MAX])
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        snprintf(why, TREE_ERR_MAX, "opening %s/: %s", rel, strerror(errno));
        return -EIO;
    }
    int r = 0;
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *path = sbx_xasprintf("%s/%s", rel, de->d_name);
        add(e, path);
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            snprintf(why, TREE_ERR_MAX, "stat %s: %s", path, strerror(errno));
            r = -EIO;
        } else if (S_ISDIR(st.st_mode)) {
            int fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                snprintf(why, TREE_ERR_MAX, "opening %s: %s", path, strerror(errno));
                r = -EIO;
            } else {
                r = walk(fd, path, e, why);
            }
        }
    }
    closedir(d);
    return r;
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read size of the tree digest, in one buffer for the whole tree: a tree has tens of
 * thousands of files (33 000 in base), and a megabyte allocated for each took 40 s of a
 * 1.5 s digest under ASan. */
#define TREE_READ_CHUNK (1u << 20)

static int file_sha256(int rootfd, const char *rel, unsigned char *buf, char hex[65])
{
    _cleanup_close_ int fd = openat(rootfd, rel + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf, TREE_READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        EVP_DigestUpdate(md, buf, (size_t)n);
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dn = 0;
    EVP_DigestFinal_ex(md, d, &dn);
    EVP_MD_CTX_free(md);
    sbx_hex(d, 32, hex);
    return r;
}

int tree_digest(const char *root, char out[65], long long *bytes, long long *entries,
                char why[TREE_ERR_MAX])
{
    *bytes = *entries = 0;
    _cleanup_close_ int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        snprintf(why, TREE_ERR_MAX, "opening %s: %s", root, strerror(errno));
        return -EIO;
    }
    int dup = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0) {
        snprintf(why, TREE_ERR_MAX, "dup: %s", strerror(errno));
        return -EIO;
    }
    struct entries e = {0};
    int r = walk(dup, "", &e, why);
    if (r == 0)
        qsort(e.v, e.n, sizeof(*e.v), by_bytes);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    _cleanup_free_ unsigned char *buf = sbx_xmalloc(TREE_READ_CHUNK);
    for (size_t i = 0; r == 0 && i < e.n; i++) {
        const char *rel = e.v[i];
        struct stat st;
        if (fstatat(rootfd, rel + 1, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            snprintf(why, TREE_ERR_MAX, "stat %s: %s", rel, strerror(errno));
            r = -EIO;
            break;
        }
        char what[4096 + 1];
        long long size = 0;
        if (S_ISREG(st.st_mode)) {
            if ((r = file_sha256(rootfd, rel, buf, what)) < 0) {
                snprintf(why, TREE_ERR_MAX, "reading %s: %s", rel, strerror(-r));
                break;
            }
            size = st.st_size;
            *bytes += size;
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(rootfd, rel + 1, what, sizeof(what) - 1);
            what[n < 0 ? 0 : n] = '\0';
        } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
            snprintf(what, sizeof(what), "%u:%u", major(st.st_rdev), minor(st.st_rdev));
        } else {
            snprintf(what, sizeof(what), "-");
        }
        if (*bytes > TREE_BYTES_MAX) {
            snprintf(why, TREE_ERR_MAX, "the tree is larger than %lld bytes (TREE_BYTES_MAX)",
                     TREE_BYTES_MAX);
            r = -EFBIG;
            break;
        }
        /* The path is length-prefixed so no file name can forge a line boundary. */
        _cleanup_free_ char *line =
            sbx_xasprintf("%zu:%s %o %u %u %lld %s\n", strlen(rel), rel, (unsigned)st.st_mode,
                          (unsigned)st.st_uid, (unsigned)st.st_gid, size, what);
        EVP_DigestUpdate(md, line, strlen(line));
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dn = 0;
    EVP_DigestFinal_ex(md, d, &dn);
    EVP_MD_CTX_free(md);
    sbx_hex(d, 32, out);
    *entries = (long long)e.n;
    for (size_t i = 0; i < e.n; i++)
        free(e.v[i]);
    free(e.v);
    return r;
}
