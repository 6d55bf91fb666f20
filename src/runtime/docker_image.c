/* Templates into the engine as images, and the engine's identity (docker_image.h). */
#include "docker_image.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "docker_api.h"


struct tar_writer {
    const char *rootfs;
    int fd; /* the pipe's write end, closed when done */
    char why[256];
};

/* The writer thread: the tree, as a pax tar with paths relative to its root. */
static void *write_tar(void *data)
{
    struct tar_writer *w = data;
    struct archive *disk = archive_read_disk_new();
    struct archive *out = archive_write_new();
    struct archive_entry *e = NULL;
    if (!disk || !out) {
        snprintf(w->why, sizeof(w->why), "out of memory");
        goto done;
    }
    archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
    archive_read_disk_set_standard_lookup(disk);
    archive_write_set_format_pax_restricted(out);
    /* Names as the bytes on disk: sbxd runs in the C locale, where a UTF-8 file name
     * (ca-certificates has some) does not translate. */
    if (archive_write_set_options(out, "hdrcharset=BINARY") != ARCHIVE_OK ||
        archive_write_open_fd(out, w->fd) != ARCHIVE_OK ||
        archive_read_disk_open(disk, w->rootfs) != ARCHIVE_OK) {
        snprintf(w->why, sizeof(w->why), "%s", archive_error_string(disk));
        goto done;
    }
    size_t root_len = strlen(w->rootfs);
    e = archive_entry_new();
    char buf[65536];
    for (;;) {
        int r = archive_read_next_header2(disk, e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK) {
            snprintf(w->why, sizeof(w->why), "%s", archive_error_string(disk));
            goto done;
        }
        archive_read_disk_descend(disk);
        const char *path = archive_entry_pathname(e);
        _cleanup_free_ char *rel = sbx_xstrdup(strlen(path) > root_len ? path + root_len + 1 : ".");
        archive_entry_copy_pathname(e, rel);
        if (archive_write_header(out, e) != ARCHIVE_OK) {
            snprintf(w->why, sizeof(w->why), "%s", archive_error_string(out));
            goto done;
        }
        if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0) {
            _cleanup_close_ int fd = open(archive_entry_sourcepath(e), O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                snprintf(w->why, sizeof(w->why), "%s: %s", rel, strerror(errno));
                goto done;
            }
            ssize_t n;
            while ((n = read(fd, buf, sizeof(buf))) > 0)
                if (archive_write_data(out, buf, (size_t)n) < 0) {
                    snprintf(w->why, sizeof(w->why), "%s", archive_error_string(out));
                    goto done;
                }
        }
    }
    if (archive_write_close(out) != ARCHIVE_OK)
        snprintf(w->why, sizeof(w->why), "%s", archive_error_string(out));
done:
    if (e)
        archive_entry_free(e);
    if (disk)
        archive_read_free(disk);
    if (out)
        archive_write_free(out);
    close(w->fd);
    w->fd = -1;
    return NULL;
}

int docker_image_import(const char *socket, const char *rootfs, const char *image, char **id,
                        struct sbx_err *err)
{
    *id = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_err_sys(err, errno, "pipe");
    struct tar_writer w = {.rootfs = rootfs, .fd = p[1]};
    pthread_t t;
    int r = pthread_create(&t, NULL, write_tar, &w);
    if (r != 0) {
        close(p[0]);
        close(p[1]);
        return sbx_err_sys(err, r, "starting the tar writer");
    }
    _cleanup_free_ char *path =
        sbx_xasprintf("/images/create?fromSrc=-&repo=%s&tag=latest", image);
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    r = docker_upload(socket, DOCKER_IMPORT_TIMEOUT_MS, path, p[0], &status, &resp, err);
    close(p[0]); /* a writer still at work gets EPIPE and ends */
    pthread_join(t, NULL);
    if (r < 0)
        return r;
    if (w.why[0])
        return sbx_err_set(err, EIO, "internal", "packing %s: %s", rootfs, w.why);
    if (status != 200)
        return sbx_err_set(err, EIO, "docker_error", "importing into the engine: HTTP %ld %s",
                           status, docker_message(resp));
    /* The answer is a stream of JSON progress lines; the last one names the image. */
    char *last = resp, *nl;
    while ((nl = strchr(last, '\n')) && nl[1])
        last = nl + 1;
    json_t *j = json_loads(last, JSON_DISABLE_EOF_CHECK, NULL);
    const char *s = json_string_value(json_object_get(j, "status"));
    const char *e = json_string_value(json_object_get(j, "error"));
    if (e || !s) {
        r = sbx_err_set(err, EIO, "docker_error", "importing into the engine: %s",
                        e ? e : "no image id in the answer");
        json_decref(j);
        return r;
    }
    *id = sbx_xstrdup(s);
    json_decref(j);
    return 0;
}

int docker_engine_info(const char *socket, long timeout_ms, char **version, bool *has_runtime,
                       const char *runtime, struct sbx_err *err)
{
    if (timeout_ms <= 0 || timeout_ms > DOCKER_INFO_TIMEOUT_MS)
        timeout_ms = DOCKER_INFO_TIMEOUT_MS;
    *version = NULL;
    *has_runtime = false;
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    int r = docker_call(socket, timeout_ms, "GET", "/info", NULL, &status, &resp, err);
    if (r < 0)
        return r;
    json_t *j = status == 200 ? json_loads(resp, 0, NULL) : NULL;
    if (!j)
        return sbx_err_set(err, EIO, "docker_unreachable", "docker engine at %s: HTTP %ld",
                           socket, status);
    const char *v = json_string_value(json_object_get(j, "ServerVersion"));
    *version = sbx_xstrdup(v ? v : "");
    *has_runtime = runtime && json_object_get(json_object_get(j, "Runtimes"), runtime);
    json_decref(j);
    return 0;
}

int docker_engine_containers(const char *socket, long timeout_ms, const char *label,
                             json_t **out, struct sbx_err *err)
{
    *out = NULL;
    if (timeout_ms <= 0 || timeout_ms > DOCKER_INFO_TIMEOUT_MS)
        timeout_ms = DOCKER_INFO_TIMEOUT_MS;
    /* filters={"label":["<label>"]}, URL-encoded; labels are sbx's own names. */
    _cleanup_free_ char *path =
        sbx_xasprintf("/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22%s%%22%%5D%%7D",
                      label);
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    int r = docker_call(socket, timeout_ms, "GET", path, NULL, &status, &resp, err);
    if (r < 0)
        return r;
    json_t *j = status == 200 ? json_loads(resp, 0, NULL) : NULL;
    if (!json_is_array(j)) {
        json_decref(j);
        return sbx_err_set(err, EIO, "docker_unreachable",
                           "docker engine at %s: listing containers: HTTP %ld %s", socket, status,
                           docker_message(resp));
    }
    *out = j;
    return 0;
}
