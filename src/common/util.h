/* Small ownership helpers in the style of systemd/crun: cleanup attributes and
 * explicit steals, so every early return releases what it holds. */
#ifndef SBX_UTIL_H
#define SBX_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SBX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void sbx_freep(void *p)
{
    free(*(void **)p);
}
static inline void sbx_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
    }
}
static inline void sbx_fclosep(FILE **f)
{
    if (*f)
        (void)fclose(*f);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(sbx_freep)
#define _cleanup_close_ _cleanup_(sbx_closep)
#define _cleanup_fclose_ _cleanup_(sbx_fclosep)

/* Steal a pointer or fd out of a cleanup variable. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _tp = (p);                                                                   \
        (p) = NULL;                                                                                \
        _tp;                                                                                       \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _tfd = (fd);                                                                           \
        (fd) = -1;                                                                                 \
        _tfd;                                                                                      \
    })

/* Allocation failure is not recoverable in a meaningful way for this daemon. */
void *sbx_xmalloc(size_t n);
void *sbx_xcalloc(size_t n, size_t m);
void *sbx_xrealloc(void *p, size_t n);
char *sbx_xstrdup(const char *s);
char *sbx_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Append n bytes to a queue that is consumed from *off. A drained queue starts over at 0
 * first, so a buffer that is written out as fast as it fills does not keep growing. */
void sbx_queue_append(uint8_t **buf, size_t *off, size_t *len, const void *p, size_t n);

/* Monotonic and wall-clock milliseconds. */
long long sbx_now_ms(void);
long long sbx_wall_ms(void);

/* Write all of buf, retrying on EINTR. Returns 0 or -errno. */
int sbx_write_all(int fd, const void *buf, size_t len);
/* Read until cap bytes or end of file, retrying on EINTR: *len bytes read (fewer than cap
 * only at end of file). Returns 0 or -errno, *len untouched on failure. */
int sbx_read_upto(int fd, void *buf, size_t cap, size_t *len);
/* Read a whole small file (at most max bytes). Returns 0 or -errno; *out is NUL-terminated. */
int sbx_read_file(const char *path, size_t max, char **out, size_t *out_len);
/* Write a file atomically (temp + fsync + rename) with the given mode. */
int sbx_write_file_atomic(const char *path, const void *buf, size_t len, int mode);
/* The same without the fsync: for a file that only means something while the processes
 * that read it live, so a host crash leaves nothing that needs it whole. */
int sbx_write_file_replace(const char *path, const void *buf, size_t len, int mode);
/* mkdir -p */
int sbx_mkdir_p(const char *path, int mode);
/* Mark the directory path the top of a hierarchy (FS_TOPDIR_FL): ext2/3/4 then spread its
 * subdirectories over block groups of their own (Orlov) instead of filling its own group.
 * 0, or -errno where the filesystem has no such flag (-ENOTTY, -EOPNOTSUPP). */
int sbx_mark_topdir(const char *path);
/* rm -rf beneath an already-validated directory path; never follows symlinks. */
int sbx_rm_rf(const char *path);
/* The same for name inside the directory dirfd (a single component, not followed). */
int sbx_rm_rf_at(int dirfd, const char *name);
int sbx_set_nonblock(int fd);
/* Copy in to out (sized to match) extent by extent: holes stay holes, so a sparse image
 * costs only its data. Both offsets are explicit; returns 0 or -errno. */
int sbx_copy_sparse(int in, int out);
/* Bytes on disk beneath dirfd (allocated blocks: images are sparse), descending depth
 * levels; never follows symlinks. Takes dirfd (closed). */
long long sbx_dir_bytes(int dirfd, int depth);

#endif
