/* Tar streams for the engine (docker_tar.h). */
#include "docker_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

#define TAR_CHUNK 65536

static void archive_free_p(struct archive **a)
{
    if (*a)
        archive_write_free(*a);
}
static void disk_free_p(struct archive **a)
{
    if (*a)
        archive_read_free(*a);
}
static void entry_free_p(struct archive_entry **e)
{
    if (*e)
        archive_entry_free(*e);
}

/* A pax writer on fd. Names as the bytes on disk: sbxd runs in the C locale, where a UTF-8
 * file name (ca-certificates has some) does not translate. */
static struct archive *tar_open(int fd, char *why, size_t why_len)
{
    struct archive *out = archive_write_new();
    if (!out) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    archive_write_set_format_pax_restricted(out);
    if (archive_write_set_options(out, "hdrcharset=BINARY") != ARCHIVE_OK ||
        archive_write_open_fd(out, fd) != ARCHIVE_OK) {
        snprintf(why, why_len, "%s", archive_error_string(out));
        archive_write_free(out);
        return NULL;
    }
    return out;
}

/* The header e, then the data of src when it is a non-empty regular file. */
static int tar_put(struct archive *out, struct archive_entry *e, const char *src, char *buf,
                   char *why, size_t why_len)
{
    if (archive_write_header(out, e) != ARCHIVE_OK) {
        snprintf(why, why_len, "%s", archive_error_string(out));
        return -1;
    }
    if (archive_entry_filetype(e) != AE_IFREG || archive_entry_size(e) <= 0)
        return 0;
    _cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "%s: %s", archive_entry_pathname(e), strerror(errno));
        return -1;
    }
    ssize_t n;
    while ((n = read(fd, buf, TAR_CHUNK)) > 0)
        if (archive_write_data(out, buf, (size_t)n) < 0) {
            snprintf(why, why_len, "%s", archive_error_string(out));
            return -1;
        }
    if (n < 0) {
        snprintf(why, why_len, "%s: %s", archive_entry_pathname(e), strerror(errno));
        return -1;
    }
    return 0;
}

static int tar_close(struct archive *out, char *why, size_t why_len)
{
    if (archive_write_close(out) != ARCHIVE_OK) {
        snprintf(why, why_len, "%s", archive_error_string(out));
        return -1;
    }
    return 0;
}

int docker_tar_tree(const char *dir, const char *prefix, int fd, char *why, size_t why_len)
{
    __attribute__((cleanup(disk_free_p))) struct archive *disk = archive_read_disk_new();
    __attribute__((cleanup(archive_free_p))) struct archive *out = tar_open(fd, why, why_len);
    __attribute__((cleanup(entry_free_p))) struct archive_entry *e = archive_entry_new();
    if (!out)
        return -1;
    if (!disk || !e) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
    archive_read_disk_set_standard_lookup(disk);
    if (archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
        snprintf(why, why_len, "%s", archive_error_string(disk));
        return -1;
    }
    size_t root_len = strlen(dir);
    _cleanup_free_ char *buf = sbx_xmalloc(TAR_CHUNK);
    for (;;) {
        int r = archive_read_next_header2(disk, e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK) {
            snprintf(why, why_len, "%s", archive_error_string(disk));
            return -1;
        }
        archive_read_disk_descend(disk);
        const char *path = archive_entry_pathname(e);
        const char *rest = strlen(path) > root_len ? path + root_len + 1 : NULL;
        _cleanup_free_ char *rel = !prefix ? sbx_xstrdup(rest ? rest : ".")
                                   : rest  ? sbx_xasprintf("%s/%s", prefix, rest)
                                           : sbx_xstrdup(prefix);
        archive_entry_copy_pathname(e, rel);
        if (tar_put(out, e, archive_entry_sourcepath(e), buf, why, why_len) < 0)
            return -1;
    }
    return tar_close(out, why, why_len);
}

int docker_tar_files(const char *const *paths, const char *const *names, size_t n, int fd,
                     char *why, size_t why_len)
{
    __attribute__((cleanup(disk_free_p))) struct archive *disk = archive_read_disk_new();
    __attribute__((cleanup(archive_free_p))) struct archive *out = tar_open(fd, why, why_len);
    if (!out)
        return -1;
    if (!disk) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    _cleanup_free_ char *buf = sbx_xmalloc(TAR_CHUNK);
    for (size_t i = 0; i < n; i++) {
        __attribute__((cleanup(entry_free_p))) struct archive_entry *e = archive_entry_new();
        if (!e) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
        archive_entry_copy_sourcepath(e, paths[i]);
        if (archive_read_disk_entry_from_file(disk, e, -1, NULL) != ARCHIVE_OK ||
            archive_entry_filetype(e) != AE_IFREG) {
            snprintf(why, why_len, "%s: %s", paths[i],
                     archive_error_string(disk) ? archive_error_string(disk)
                                                : "not a regular file");
            return -1;
        }
        archive_entry_copy_pathname(e, names[i]);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_uname(e, "root");
        archive_entry_set_gname(e, "root");
        archive_entry_set_perm(e, 0755);
        if (tar_put(out, e, paths[i], buf, why, why_len) < 0)
            return -1;
    }
    return tar_close(out, why, why_len);
}
