#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

bool bsl_module_name(const char *name)
{
    size_t n = strlen(name);
    return (n > 4 && !strcasecmp(name + n - 4, ".bsl")) ||
           (n > 3 && !strcasecmp(name + n - 3, ".os"));
}

static int add(struct bsl_paths *p, const char *path)
{
    if (p->n >= BSL_WALK_FILES_MAX) {
        p->truncated = true;
        return 0;
    }
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        char **q = realloc(p->v, nc * sizeof(*q));
        if (!q)
            return -ENOMEM;
        p->v = q;
        p->cap = nc;
    }
    if (!(p->v[p->n] = strdup(path)))
        return -ENOMEM;
    p->n++;
    return 0;
}

static int walk_dir(int dfd, const char *path, int depth, struct bsl_paths *out)
{
    if (depth > BSL_WALK_DEPTH_MAX) {
        close(dfd);
        out->truncated = true;
        return 0;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -errno;
    }
    int r = 0;
    struct dirent *e;
    while (r == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue; /* ., .., and hidden folders such as .git */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *child = malloc(n);
        if (!child) {
            r = -ENOMEM;
            break;
        }
        snprintf(child, n, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", e->d_name);
        if (S_ISDIR(st.st_mode)) {
            int cfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0)
                r = walk_dir(cfd, child, depth + 1, out);
        } else if (S_ISREG(st.st_mode) && bsl_module_name(e->d_name)) {
            r = add(out, child);
        }
        free(child);
    }
    closedir(d);
    return r;
}

static int path_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int bsl_walk(const char *path, struct bsl_paths *out, struct bsl_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return bsl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    size_t before = out->n;
    int r;
    if (S_ISDIR(st.st_mode)) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return bsl_err_set(err, -errno, "%s: %s", path, strerror(errno));
        r = walk_dir(fd, path, 0, out);
    } else if (S_ISREG(st.st_mode)) {
        r = add(out, path);
    } else {
        return bsl_err_set(err, -EINVAL, "%s: not a file or a folder", path);
    }
    if (r < 0)
        return bsl_err_set(err, r, "%s: %s", path, strerror(-r));
    if (out->n > before)
        qsort(out->v + before, out->n - before, sizeof(char *), path_cmp);
    return 0;
}

void bsl_paths_free(struct bsl_paths *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    memset(p, 0, sizeof(*p));
}

int bsl_read_file(const char *path, char **buf, size_t *len, struct bsl_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return bsl_err_set(err, -errno, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return bsl_err_set(err, -EINVAL, "not a regular file");
    }
    if ((uint64_t)st.st_size > BSL_FILE_MAX) {
        close(fd);
        return bsl_err_set(err, -EFBIG, "%lld bytes, over the %u-byte limit", (long long)st.st_size,
                           BSL_FILE_MAX);
    }
    size_t cap = (size_t)st.st_size, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return bsl_err_set(err, -ENOMEM, "out of memory");
    }
    while (n < cap) {
        ssize_t k = read(fd, b + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(b);
            close(fd);
            return bsl_err_set(err, -e, "%s", strerror(e));
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}
