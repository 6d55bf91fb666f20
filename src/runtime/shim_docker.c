/* Import circle with shim.c and shim_relay.c (allowed inside a folder,
 * docs/architecture.md#layering): the shim's main loop (shim.c) spawns and commands the
 * attach relay here, which reports through the shim's log (shim_log); all three are
 * sbx-shim's, and nothing outside sees them. */
/* sbx-shim's docker backend (docs/runtime.md "Docker"): the container on a Docker Engine
 * instead of runsc's. The shim forks one child, the attach relay, which creates the
 * container from <state_dir>/docker.json, attaches to its stdio (a hijacked connection to
 * the engine), starts it, and then copies bytes: the shim's pipe to the container's
 * stdin, the container's stdout (demultiplexed from the engine's 8-byte stream frames) to
 * the shim's pipe, its stderr to runsc.log. To the shim the relay is what the native init
 * is for the namespaces backend: its pipes are the agent's stdio, its exit (with the
 * container's status) is the container's. On a remote engine (tcp:// with TLS) the relay
 * also makes the workspace's volume and copies the agent in before the start. The engine
 * keeps the container whatever sbxd does; the shim and its relay, detached from sbxd, keep
 * the attach, so the sandbox survives an sbxd restart as on the other backends. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "docker_api.h"
#include "docker_tar.h"
#include "shim.h"
#include "shim_docker.h"

#define DOCKER_ENGINE_FILE_MAX 4096
#define DOCKER_CONFIG_MAX (64u * 1024u)
#define DOCKER_RELAY_CHUNK 65536u
#define DOCKER_FRAME_HEAD 8 /* stream type, 3 zero bytes, payload length (big endian) */

static void relay_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void relay_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sbx-shim docker: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    _exit(code);
}

static int write_all_fd(int fd, const char *p, size_t n)
{
    return sbx_write_all(fd, p, n) < 0 ? -1 : 0;
}

/* Send all of buf on the non-blocking engine socket. */
static int stream_send_all(struct docker_stream *st, const char *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        long n = docker_stream_send(st, buf + off, len - off);
        if (n == -EAGAIN) {
            struct pollfd p = {.fd = docker_stream_fd(st), .events = POLLOUT};
            (void)poll(&p, 1, -1);
            continue;
        }
        if (n < 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

/* The engine's multiplexed stdout/stderr: whole frames out of the bytes received. */
struct demux {
    unsigned char head[DOCKER_FRAME_HEAD];
    size_t head_len;
    size_t left; /* payload bytes of the current frame still to come */
    int to;      /* its destination fd */
};

static int demux_feed(struct demux *d, const char *p, size_t n)
{
    while (n) {
        if (d->left == 0) {
            size_t take = DOCKER_FRAME_HEAD - d->head_len;
            take = take < n ? take : n;
            memcpy(d->head + d->head_len, p, take);
            d->head_len += take, p += take, n -= take;
            if (d->head_len < DOCKER_FRAME_HEAD)
                return 0;
            d->head_len = 0;
            d->left = (size_t)d->head[4] << 24 | (size_t)d->head[5] << 16 |
                      (size_t)d->head[6] << 8 | d->head[7];
            d->to = d->head[0] == 1 ? 1 : 2;
            continue;
        }
        size_t take = d->left < n ? d->left : n;
        if (write_all_fd(d->to, p, take) < 0 && d->to == 1)
            return -1;
        d->left -= take, p += take, n -= take;
    }
    return 0;
}

/* The engine's path for the sandbox's container: what, then its name, then rest. */
static char *name_path(const char *id, const char *what, const char *rest)
{
    return sbx_xasprintf("%s" DOCKER_NAME_PREFIX "%s%s", what, id, rest);
}

/* PUT a tar into the (created, not started) container at dir: made by fill into an
 * unnamed file in the state dir, then sent. */
typedef int (*tar_fill_fn)(const void *arg, int fd, char *why, size_t why_len);
static void put_archive(const struct docker_engine *e, long timeout, const char *id,
                        const char *state_dir, const char *dir, tar_fill_fn fill,
                        const void *arg)
{
    _cleanup_close_ int fd = open(state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        relay_die(125, "a temporary file in %s: %s", state_dir, strerror(errno));
    char why[256] = "";
    if (fill(arg, fd, why, sizeof(why)) < 0)
        relay_die(125, "packing for %s: %s", dir, why);
    if (lseek(fd, 0, SEEK_SET) < 0)
        relay_die(125, "rewinding the archive: %s", strerror(errno));
    _cleanup_free_ char *rest = sbx_xasprintf("/archive?path=%s", dir);
    _cleanup_free_ char *path = name_path(id, "/containers/", rest);
    struct sbx_err err = {0};
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    if (docker_upload(e, timeout, "PUT", path, fd, &status, &resp, &err) < 0)
        relay_die(125, "%s", err.msg);
    if (status != 200)
        relay_die(125, "copying into the container at %s: HTTP %ld %s", dir, status,
                  docker_message(resp));
}

/* The new workspace as "workspace/...": the volume's root then gets its owner (the
 * sandbox user) and mode, which an entry "." does not give a mount point. */
static int fill_workspace(const void *arg, int fd, char *why, size_t why_len)
{
    return docker_tar_tree(arg, "workspace", fd, why, why_len);
}

/* The agent (and sbx-bsl beside it when the sandbox has one) at their places. */
static int fill_agent(const void *arg, int fd, char *why, size_t why_len)
{
    const char *state_dir = arg;
    _cleanup_free_ char *agent = sbx_xasprintf("%s/sbx-agent", state_dir);
    _cleanup_free_ char *bsl = sbx_xasprintf("%s/sbx-bsl", state_dir);
    const char *paths[] = {agent, bsl};
    const char *names[] = {"opt/sbx/sbx-agent", "opt/sbx/sbx-bsl"};
    return docker_tar_files(paths, names, access(bsl, F_OK) == 0 ? 2 : 1, fd, why, why_len);
}

/* A remote engine's volume for the workspace, "sbx-<id>", made at the first start (and
 * true then: the new workspace is to be seeded); later starts find it with the files. */
static bool volume_ensure(const struct docker_engine *e, long timeout, const char *id)
{
    struct sbx_err err = {0};
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    _cleanup_free_ char *path = name_path(id, "/volumes/", "");
    if (docker_call(e, timeout, "GET", path, NULL, &status, &resp, &err) < 0)
        relay_die(125, "%s", err.msg);
    if (status == 200)
        return false;
    if (status != 404)
        relay_die(125, "looking for the volume: HTTP %ld %s", status, docker_message(resp));
    _cleanup_free_ char *name = name_path(id, "", "");
    json_t *j = json_pack("{s:s,s:{s:s}}", "Name", name, "Labels", DOCKER_LABEL_ID, id);
    _cleanup_free_ char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        relay_die(125, "out of memory");
    free(resp);
    resp = NULL;
    if (docker_call(e, timeout, "POST", "/volumes/create", body, &status, &resp, &err) < 0)
        relay_die(125, "%s", err.msg);
    if (status != 201)
        relay_die(125, "creating the volume: HTTP %ld %s", status, docker_message(resp));
    return true;
}

/* The relay's whole life, in the forked child: fds 0 and 1 are the shim's pipes, 2 is
 * runsc.log. Exits with the container's status. */
static void relay_main(const struct docker_engine *engine, long timeout, const char *id,
                       const char *state_dir, const char *seed) __attribute__((noreturn));
static void relay_main(const struct docker_engine *engine, long timeout, const char *id,
                       const char *state_dir, const char *seed)
{
    struct sbx_err err = {0};
    _cleanup_free_ char *cfg_path = sbx_xasprintf("%s/docker.json", state_dir);
    _cleanup_free_ char *body = NULL;
    int rr = sbx_read_file(cfg_path, DOCKER_CONFIG_MAX, &body, NULL);
    if (rr < 0)
        relay_die(125, "reading %s: %s", cfg_path, strerror(-rr));
    long status = 0;
    _cleanup_free_ char *rm = name_path(id, "/containers/", "?force=1");
    /* A container of the same name is a leftover of an earlier start of this sandbox. */
    if (docker_call(engine, timeout, "DELETE", rm, NULL, &status, NULL, &err) < 0)
        relay_die(125, "%s", err.msg);
    bool remote = docker_host_remote(engine->host);
    bool fresh = remote && volume_ensure(engine, timeout, id);
    _cleanup_free_ char *create = name_path(id, "/containers/create?name=", "");
    _cleanup_free_ char *resp = NULL;
    if (docker_call(engine, timeout, "POST", create, body, &status, &resp, &err) < 0)
        relay_die(125, "%s", err.msg);
    if (status != 201)
        relay_die(125, "creating the container: HTTP %ld %s", status, docker_message(resp));
    if (remote) {
        /* The engine sees none of this host's files: the agent goes in by copy, and a new
         * volume gets the workspace sbxd prepared (out/, its owner, a CA bundle). */
        put_archive(engine, timeout, id, state_dir, "/", fill_agent, state_dir);
        if (fresh && seed)
            put_archive(engine, timeout, id, state_dir, "/", fill_workspace, seed);
    }
    /* Attached before the start, so not one byte the agent writes first is lost. */
    _cleanup_free_ char *attach =
        name_path(id, "/containers/", "/attach?stream=1&stdin=1&stdout=1&stderr=1");
    struct docker_stream *st = NULL;
    if (docker_hijack(engine, timeout, attach, &st, &err) < 0)
        relay_die(125, "%s", err.msg);
    _cleanup_free_ char *start = name_path(id, "/containers/", "/start");
    free(resp);
    resp = NULL;
    if (docker_call(engine, timeout, "POST", start, NULL, &status, &resp, &err) < 0)
        relay_die(125, "%s", err.msg);
    if (status != 204 && status != 304)
        relay_die(125, "starting the container: HTTP %ld %s", status, docker_message(resp));
    fprintf(stderr, "sbx-shim docker: container " DOCKER_NAME_PREFIX "%s started\n", id);

    _cleanup_free_ char *buf = sbx_xmalloc(DOCKER_RELAY_CHUNK);
    struct demux d = {0};
    bool in_open = true;
    /* The first round reads without waiting: bytes that came with the attach answer's
     * head (or that a TLS session holds decrypted) do not wake the socket. */
    bool first = true;
    for (;;) {
        struct pollfd p[2] = {{.fd = docker_stream_fd(st), .events = POLLIN},
                              {.fd = in_open ? 0 : -1, .events = POLLIN}};
        if (!first && poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (first)
            p[0].revents = POLLIN, p[1].revents = 0;
        first = false;
        if (p[1].revents) {
            ssize_t n = read(0, buf, DOCKER_RELAY_CHUNK);
            if (n > 0 && stream_send_all(st, buf, (size_t)n) < 0)
                break;
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                in_open = false; /* the shim is going: the container's end follows */
        }
        if (p[0].revents) {
            long n;
            bool eof = false;
            while ((n = docker_stream_recv(st, buf, DOCKER_RELAY_CHUNK)) > 0)
                if (demux_feed(&d, buf, (size_t)n) < 0)
                    eof = true;
            if (n == 0 || (n < 0 && n != -EAGAIN) || eof)
                break;
        }
    }
    docker_stream_free(st);
    /* The stream ended: the container has stopped (or is stopping); its status is ours. */
    _cleanup_free_ char *wait = name_path(id, "/containers/", "/wait");
    free(resp);
    resp = NULL;
    if (docker_call(engine, 0, "POST", wait, NULL, &status, &resp, &err) < 0 || status != 200)
        relay_die(255, "waiting for the container: %s", err.msg[0] ? err.msg : docker_message(resp));
    json_t *j = json_loads(resp, 0, NULL);
    int code = (int)json_integer_value(json_object_get(j, "StatusCode"));
    json_decref(j);
    fprintf(stderr, "sbx-shim docker: container exited with %d\n", code);
    _exit(code & 0xff);
}

static struct docker_engine engine_of(const struct shim *s)
{
    return (struct docker_engine){.host = s->docker_remote ? s->docker_remote : s->docker_host,
                                  .tls_dir = s->docker_tls_dir};
}

static char *opt_str(json_t *j, const char *key)
{
    const char *v = json_string_value(json_object_get(j, key));
    return v && *v ? sbx_xstrdup(v) : NULL;
}

void shim_docker_load(struct shim *s)
{
    s->docker_timeout_ms = DOCKER_TIMEOUT_DEFAULT_MS;
    _cleanup_free_ char *path = sbx_xasprintf("%s/" DOCKER_ENGINE_FILE, s->state_dir);
    _cleanup_free_ char *text = NULL;
    int r = sbx_read_file(path, DOCKER_ENGINE_FILE_MAX, &text, NULL);
    if (r < 0) {
        if (r != -ENOENT)
            shim_log(s, "docker: reading %s: %s; the defaults apply", path, strerror(-r));
        return;
    }
    json_t *j = json_loads(text, 0, NULL);
    json_int_t ms = json_integer_value(json_object_get(j, "timeout_ms"));
    s->docker_remote = opt_str(j, "host");
    s->docker_tls_dir = opt_str(j, "tls_dir");
    s->docker_seed = opt_str(j, "workspace");
    if (s->docker_remote && !docker_host_remote(s->docker_remote)) {
        shim_log(s, "docker: %s names no remote engine; this host's is used", path);
        free(s->docker_remote);
        s->docker_remote = NULL;
    }
    json_decref(j);
    if (ms > 0)
        s->docker_timeout_ms = (long)ms;
}

void shim_docker_relay(struct shim *s)
{
    struct docker_engine e = engine_of(s);
    relay_main(&e, s->docker_timeout_ms, s->id, s->state_dir, s->docker_seed);
}

void shim_docker_cmd(struct shim *s, const char *what)
{
    bool kill = !strcmp(what, "kill"), volume = !strcmp(what, "volume");
    if (volume && !s->docker_remote)
        return; /* a local engine's workspace is the host directory sbx removes */
    struct sbx_err err = {0};
    long status = 0;
    _cleanup_free_ char *resp = NULL;
    _cleanup_free_ char *path = kill     ? name_path(s->id, "/containers/", "/kill?signal=KILL")
                                : volume ? name_path(s->id, "/volumes/", "?force=1")
                                         : name_path(s->id, "/containers/", "?force=1");
    struct docker_engine e = engine_of(s);
    long long t0 = sbx_now_ms();
    int r = docker_call(&e, s->docker_timeout_ms, kill ? "POST" : "DELETE", path, NULL, &status,
                        &resp, &err);
    /* 404: no such container (or volume), 409: not running: both mean done. */
    if (r < 0)
        shim_log(s, "docker %s: %s", what, err.msg);
    else
        shim_log(s, "docker %s: HTTP %ld%s%s in %lld ms", what, status,
                 status >= 300 ? " " : "", status >= 300 ? docker_message(resp) : "",
                 sbx_now_ms() - t0);
}
