#include "bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../files/workspace.h"

static int entry_path(struct archive_entry *e, char out[WS_PATH_MAX + 1], struct sbx_err *err)
{
    const char *p = archive_entry_pathname_utf8(e);
    if (!p)
        p = archive_entry_pathname(e);
    if (!p || !*p)
        return sbx_err_set(err, EINVAL, "invalid_bundle", "an entry has no name");
    size_t n = strlen(p);
    if (n > WS_PATH_MAX)
        return sbx_err_set(err, EINVAL, "invalid_bundle", "an entry's name is too long");
    memcpy(out, p, n + 1);
    while (n > 0 && out[n - 1] == '/') /* directories end in '/' */
        out[--n] = '\0';
    if (out[0] == '/')
        return sbx_err_set(err, EINVAL, "invalid_bundle", "absolute path in the bundle: %.200s", p);
    struct sbx_err perr = {0};
    if (ws_path_check(out, false, &perr) < 0)
        return sbx_err_set(err, EINVAL, "invalid_bundle", "refused entry %.200s: %s", p, perr.msg);
    return 0;
}

/* What the tree unpacked so far makes impossible ("a" a file, then "a/b"; "d/x", then a
 * file "d") is the archive's fault, not a missing or wrong path of the caller's. */
static int blame_archive(int r, const char *path, struct sbx_err *err)
{
    if (r >= 0 || !err ||
        (strcmp(err->code, "invalid_path") && strcmp(err->code, "file_not_found")))
        return r;
    char why[sizeof(err->msg)];
    snprintf(why, sizeof(why), "%s", err->msg);
    return sbx_err_set(err, EINVAL, "invalid_bundle", "refused entry %.200s: %s", path, why);
}

static int unpack_file(struct archive *a, int dest, const char *path, uint64_t *total,
                       uint64_t archive_size, struct sbx_err *err)
{
    struct ws_writer w;
    int r = ws_writer_open(dest, path, 0644, &w, err);
    if (r < 0)
        return blame_archive(r, path, err);
    char buf[64 * 1024];
    uint64_t size = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0) {
            r = sbx_err_set(err, EINVAL, "invalid_bundle", "reading %.200s: %s", path,
                            archive_error_string(a));
            break;
        }
        size += (uint64_t)n;
        *total += (uint64_t)n;
        if (size > BUNDLE_FILE_MAX) {
            r = sbx_err_set(err, EFBIG, "bundle_too_large", "%.200s unpacks to more than %u bytes",
                            path, BUNDLE_FILE_MAX);
            break;
        }
        if (*total > BUNDLE_TOTAL_MAX || *total > archive_size * BUNDLE_RATIO_MAX) {
            r = sbx_err_set(err, EFBIG, "bundle_too_large", "the bundle unpacks to more than %s",
                            *total > BUNDLE_TOTAL_MAX ? "50 MiB"
                                                      : "100 times its own size (a zip bomb?)");
            break;
        }
        if ((r = ws_writer_write(&w, buf, (size_t)n, err)) < 0)
            break;
    }
    if (r == 0)
        r = ws_writer_commit(&w, false, err);
    ws_writer_close(&w);
    return blame_archive(r, path, err);
}

int bundle_unpack(int fd, int dest, struct sbx_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sbx_err_sys(err, errno, "the uploaded bundle");
    if ((uint64_t)st.st_size > BUNDLE_UPLOAD_MAX)
        return sbx_err_set(err, EFBIG, "bundle_too_large", "bundles are limited to %u bytes",
                           BUNDLE_UPLOAD_MAX);
    if (lseek(fd, 0, SEEK_SET) < 0)
        return sbx_err_sys(err, errno, "the uploaded bundle");
    struct archive *a = archive_read_new();
    if (!a)
        abort();
    archive_read_support_format_zip(a);
    archive_read_support_format_tar(a);
    archive_read_support_filter_gzip(a);
    int r = 0;
    if (archive_read_open_fd(a, fd, 64 * 1024) != ARCHIVE_OK) {
        r = sbx_err_set(err, EINVAL, "invalid_bundle", "not a zip or tar archive: %s",
                        archive_error_string(a));
        goto out;
    }
    uint64_t total = 0;
    unsigned entries = 0;
    struct archive_entry *e;
    int ar;
    while ((ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        if (++entries > BUNDLE_ENTRIES_MAX) {
            r = sbx_err_set(err, EFBIG, "bundle_too_large", "more than %d entries in the bundle",
                            BUNDLE_ENTRIES_MAX);
            goto out;
        }
        char path[WS_PATH_MAX + 1];
        if ((r = entry_path(e, path, err)) < 0)
            goto out;
        if (archive_entry_hardlink(e) || archive_entry_symlink(e)) {
            r = sbx_err_set(err, EINVAL, "invalid_bundle",
                            "links are not allowed in a bundle: %.200s", path);
            goto out;
        }
        mode_t type = archive_entry_filetype(e);
        if (type == AE_IFDIR)
            continue; /* made as needed for the files beneath */
        if (type != AE_IFREG) {
            r = sbx_err_set(err, EINVAL, "invalid_bundle",
                            "only files and directories are allowed in a bundle: %.200s", path);
            goto out;
        }
        if (archive_entry_size_is_set(e) && archive_entry_size(e) > (la_int64_t)BUNDLE_FILE_MAX) {
            r = sbx_err_set(err, EFBIG, "bundle_too_large", "%.200s unpacks to more than %u bytes",
                            path, BUNDLE_FILE_MAX);
            goto out;
        }
        if ((r = unpack_file(a, dest, path, &total, (uint64_t)st.st_size, err)) < 0)
            goto out;
    }
    if (ar != ARCHIVE_EOF)
        r = sbx_err_set(err, EINVAL, "invalid_bundle", "a damaged archive: %s",
                        archive_error_string(a));
out:
    archive_read_free(a);
    return r;
}
