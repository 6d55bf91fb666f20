#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

static void oom(void)
{
    static const char m[] = "sbx: out of memory\n";
    (void)!write(2, m, sizeof(m) - 1);
    abort();
}

void *sbx_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *sbx_xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p)
        oom();
    return p;
}

void *sbx_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

void sbx_queue_append(uint8_t **buf, size_t *off, size_t *len, const void *p, size_t n)
{
    if (*off > 0 && *off == *len)
        *off = *len = 0;
    *buf = sbx_xrealloc(*buf, *len + n);
    memcpy(*buf + *len, p, n);
    *len += n;
}

char *sbx_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        oom();
    return p;
}

char *sbx_xasprintf(const char *fmt, ...)
{
    char *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&p, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return p;
}

long long sbx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long sbx_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sbx_read_upto(int fd, void *buf, size_t cap, size_t *len)
{
    char *p = buf;
    size_t at = 0;
    while (at < cap) {
        ssize_t n = read(fd, p + at, cap - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        at += (size_t)n;
    }
    *len = at;
    return 0;
}

int sbx_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int sbx_read_file(const char *path, size_t max, char **out, size_t *out_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, len = 0;
    _cleanup_free_ char *data = sbx_xmalloc(cap + 1);
    for (;;) {
        if (len == cap) {
            if (cap >= max)
                return -EFBIG;
            cap = cap * 2 > max ? max : cap * 2;
            data = sbx_xrealloc(data, cap + 1);
        }
        ssize_t n = read(fd, data + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    data[len] = '\0';
    if (out_len)
        *out_len = len;
    *out = TAKE_PTR(data);
    return 0;
}

static int write_file_renamed(const char *path, const void *buf, size_t len, int mode, bool sync)
{
    _cleanup_free_ char *tmp = sbx_xasprintf("%s.tmp.%d", path, (int)getpid());
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = sbx_write_all(fd, buf, len);
    if (r == 0 && fchmod(fd, (mode_t)mode) < 0)
        r = -errno;
    if (r == 0 && sync && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

int sbx_write_file_atomic(const char *path, const void *buf, size_t len, int mode)
{
    return write_file_renamed(path, buf, len, mode, true);
}

int sbx_write_file_replace(const char *path, const void *buf, size_t len, int mode)
{
    return write_file_renamed(path, buf, len, mode, false);
}

int sbx_mark_topdir(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int flags = 0;
    if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
        return -errno;
    if (flags & FS_TOPDIR_FL)
        return 0;
    flags |= FS_TOPDIR_FL;
    return ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 ? -errno : 0;
}

int sbx_mkdir_p(const char *path, int mode)
{
    _cleanup_free_ char *p = sbx_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int rm_rf_at(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP) {
            if (unlinkat(parent, name, 0) < 0 && errno != ENOENT)
                return -errno;
            return 0;
        }
        return errno == ENOENT ? 0 : -errno;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = rm_rf_at(dirfd(d), de->d_name);
        if (r < 0 && ret == 0)
            ret = r;
    }
    closedir(d);
    if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && ret == 0)
        ret = -errno;
    return ret;
}

int sbx_rm_rf(const char *path)
{
    return rm_rf_at(AT_FDCWD, path);
}

int sbx_rm_rf_at(int dirfd, const char *name)
{
    return rm_rf_at(dirfd, name);
}

int sbx_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int sbx_copy_sparse(int in, int out)
{
    struct stat st;
    if (fstat(in, &st) < 0 || ftruncate(out, st.st_size) < 0)
        return -errno;
    off_t pos = 0;
    for (;;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -errno;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -errno;
        loff_t ip = data, op = data;
        size_t left = (size_t)(hole - data);
        while (left) {
            ssize_t n = copy_file_range(in, &ip, out, &op, left, 0);
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP)) {
                /* Linux 5.19+ copies across filesystems only of one type (a data dir
                 * on tmpfs, the binaries on ext4): copy through a buffer then. */
                char buf[65536];
                n = pread(in, buf, left < sizeof(buf) ? left : sizeof(buf), ip);
                if (n > 0 && pwrite(out, buf, (size_t)n, op) != n)
                    return errno ? -errno : -EIO;
                ip += n > 0 ? n : 0;
                op += n > 0 ? n : 0;
            }
            if (n <= 0)
                return n < 0 ? -errno : -EIO;
            left -= (size_t)n;
        }
        pos = hole;
    }
}

long long sbx_dir_bytes(int dirfd, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return 0;
    }
    long long total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.' || fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode))
            total += (long long)st.st_blocks * 512;
        else if (S_ISDIR(st.st_mode) && depth > 0) {
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                total += sbx_dir_bytes(sub, depth - 1);
        }
    }
    closedir(d);
    return total;
}
