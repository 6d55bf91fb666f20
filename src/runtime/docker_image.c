/* Templates into the engine as images, and the engine's identity (docker_image.h). */
#include "docker_image.h"

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
#include "docker_tar.h"


struct tar_writer {
    const char *rootfs;
    int fd; /* the pipe's write end, closed when done */
    char why[256];
};

/* The writer thread: the tree into the pipe, closed at the end so the upload ends. */
static void *write_tar(void *data)
{
    struct tar_writer *w = data;
    (void)docker_tar_tree(w->rootfs, NULL, w->fd, w->why, sizeof(w->why));
    close(w->fd);
    w->fd = -1;
    return NULL;
}

int docker_image_import(const struct docker_engine *e, const char *rootfs, const char *image, char **id,
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
    r = docker_upload(e, DOCKER_IMPORT_TIMEOUT_MS, "POST", path, p[0], &status, &resp, err);
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
    const char *fail = json_string_value(json_object_get(j, "error"));
    if (fail || !s) {
        r = sbx_err_set(err, EIO, "docker_error", "importing into the engine: %s",
                        fail ? fail : "no image id in the answer");
        json_decref(j);
        return r;
    }
    *id = sbx_xstrdup(s);
    json_decref(j);
    return 0;
}

int docker_engine_info(const struct docker_engine *e, long timeout_ms, char **version, bool *has_runtime,
                       const char *runtime, struct sbx_err *err)
{
    if (timeout_ms <= 0 || timeout_ms > DOCKER_INFO_TIMEOUT_MS)
        timeout_ms = DOCKER_INFO_TIMEOUT_MS;
    *version = NULL;
    *has_runtime = false;
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    int r = docker_call(e, timeout_ms, "GET", "/info", NULL, &status, &resp, err);
    if (r < 0)
        return r;
    json_t *j = status == 200 ? json_loads(resp, 0, NULL) : NULL;
    if (!j)
        return sbx_err_set(err, EIO, "docker_unreachable", "docker engine at %s: HTTP %ld",
                           e->host, status);
    const char *v = json_string_value(json_object_get(j, "ServerVersion"));
    *version = sbx_xstrdup(v ? v : "");
    *has_runtime = runtime && json_object_get(json_object_get(j, "Runtimes"), runtime);
    json_decref(j);
    return 0;
}

int docker_engine_containers(const struct docker_engine *e, long timeout_ms, const char *label,
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
    int r = docker_call(e, timeout_ms, "GET", path, NULL, &status, &resp, err);
    if (r < 0)
        return r;
    json_t *j = status == 200 ? json_loads(resp, 0, NULL) : NULL;
    if (!json_is_array(j)) {
        json_decref(j);
        return sbx_err_set(err, EIO, "docker_unreachable",
                           "docker engine at %s: listing containers: HTTP %ld %s", e->host, status,
                           docker_message(resp));
    }
    *out = j;
    return 0;
}

int docker_engine_remove(const struct docker_engine *e, long timeout_ms, const char *container,
                         const char *volume, struct sbx_err *err)
{
    if (timeout_ms <= 0 || timeout_ms > DOCKER_INFO_TIMEOUT_MS)
        timeout_ms = DOCKER_INFO_TIMEOUT_MS;
    const char *what[] = {"/containers/", "/volumes/"};
    const char *name[] = {container, volume};
    for (size_t i = 0; i < 2 && name[i]; i++) {
        _cleanup_free_ char *path = sbx_xasprintf("%s%s?force=1", what[i], name[i]);
        long status = 0;
        _cleanup_free_ char *resp = NULL;
        int r = docker_call(e, timeout_ms, "DELETE", path, NULL, &status, &resp, err);
        if (r < 0)
            return r;
        if (status != 204 && status != 404)
            return sbx_err_set(err, EIO, "docker_error", "docker engine at %s: removing %s: "
                               "HTTP %ld %s", e->host, name[i], status, docker_message(resp));
    }
    return 0;
}
