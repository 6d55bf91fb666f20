/* Import circle with shim.c and shim_relay.c (allowed inside a folder,
 * docs/architecture.md#layering): the shim's main loop (shim.c) spawns and commands the
 * provider relay here, which reports through the shim's log (shim_log); all three are
 * sbx-shim's, and nothing outside sees them. */
/* sbx-shim's provider backends (docs/providers.md): the sandbox is an E2B-protocol
 * provider's, not a local container. The shim forks one child, the provider relay, which
 *   1. creates the provider sandbox through the control plane (provider.json in the state
 *      dir, written by sbxd: connection, template, timeout, env, metadata, network) and
 *      records it in provider_sandbox.json (deleted again if anything below fails);
 *   2. uploads sbx's static agent through envd's POST /files;
 *   3. starts it through envd's process.Process/Start (stdin enabled): the stream's
 *      stdout data events are the agent's frames, copied to the shim's pipe (stderr to
 *      runsc.log), and what the shim writes is sent as SendInput calls.
 * To the shim the relay is what the native init is for the namespaces backend: its pipes
 * are the agent's stdio, its exit (with the agent's status) is the sandbox's. The shim
 * and its relay are detached from sbxd, so the provider sandbox and its agent connection
 * survive an sbxd restart, which re-attaches to the shim as on the other backends. A
 * failure says why in provider_error.json ({code, message}) for rt_start_read. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../common/text.h"
#include "../common/util.h"
#include "../proto/proto.h"
#include "provider.h"
#include "provider_api.h"
#include "rt.h"
#include "shim.h"
#include "shim_provider.h"

#define PROVIDER_CONFIG_MAX (256u * 1024u)
/* One SendInput's bytes at most: its base64 (4/3 of it) well under the inner agent's
 * PROCESS_INPUT_MAX (256 KiB) and sbx's envd's RPC_MESSAGE_MAX (1 MiB). One call is in
 * flight at a time: envd's SendInput calls are separate HTTP requests, whose order at the
 * provider nothing guarantees (sbx's envd runs each as it is parsed; E2B's as its proxy
 * forwards them), so more throughput comes from larger calls, not concurrent ones. */
#define INPUT_CHUNK (128u * 1024u)
/* A stdin the remote agent has not drained yet (resource_exhausted) is retried this often,
 * for at most INPUT_RETRY_MAX_MS. */
#define INPUT_RETRY_MS 2
#define INPUT_RETRY_MAX_MS 30000
/* Where the agent is uploaded (the provider's user can write its home) and run from. */
#define AGENT_UPLOAD_DIR "/home/user"
#define AGENT_BOOT_SCRIPT                                                                         \
    "a=/tmp/.sbx-agent; cp \"$1\" \"$a\" && chmod 0700 \"$a\" && rm -f \"$1\" && exec \"$a\""

/* What provider_sandbox.json records: the provider sandbox, and whether it was paused by
 * sbx (then the next start resumes it and reconnects to the agent at agent_pid instead of
 * making a new one). */
struct record {
    struct provider_sandbox sb;
    bool paused;
    long long agent_pid;
};

struct relay {
    struct provider_conn conn;
    struct provider_sandbox sb;
    const char *state_dir;
    const char *method;  /* the stream's: process.Process/Start, or /Connect after a resume */
    json_t *msg;         /* its request (borrowed) */
    int pid_pipe[2];     /* the stream thread tells the main thread the agent's pid, or -1 */
    pthread_t thread;    /* the stream's */
    long long pid;
    int exit_code;       /* from the end event; -1 before */
    bool got_end;
    struct sbx_err stream_err;
    int stream_r;
};

void shim_provider_load(struct shim *s)
{
    size_t cap = RT_PROVIDER_SECRET_MAX + 1, len = 0;
    char *buf = sbx_xmalloc(cap);
    ssize_t n;
    while (len < cap - 1 && ((n = read(0, buf + len, cap - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
        len += n > 0 ? (size_t)n : 0;
    buf[len] = '\0';
    if (len)
        s->provider_secret = buf;
    else
        free(buf);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0 && null != 0) {
        (void)dup2(null, 0);
        close(null);
    }
}

/* provider.json with what sbxd handed over in memory put in: conn.api_key and network.
 * NULL (err filled) when it cannot be read. */
static json_t *config_load(const struct shim *s, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider.json", s->state_dir);
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(path, PROVIDER_CONFIG_MAX, &text, NULL) < 0) {
        sbx_err_set(err, errno, "internal", "reading %s: %s", path, strerror(errno));
        return NULL;
    }
    json_t *cfg = json_loads(text, 0, NULL);
    if (!json_is_object(cfg) || !json_is_object(json_object_get(cfg, "conn"))) {
        json_decref(cfg);
        sbx_err_set(err, EINVAL, "internal", "%s is not JSON", path);
        return NULL;
    }
    json_t *sec = s->provider_secret ? json_loads(s->provider_secret, 0, NULL) : NULL;
    json_t *key = json_object_get(sec, "api_key");
    if (json_is_string(key))
        json_object_set(json_object_get(cfg, "conn"), "api_key", key);
    if (json_is_object(json_object_get(sec, "network")))
        json_object_set(cfg, "network", json_object_get(sec, "network"));
    json_decref(sec);
    return cfg;
}

/* err as {code, message} in state_dir/name, for sbxd (rt_provider_failure and
 * rt_provider_pause_failure read it): 0 or -errno. */
static int failure_save(const char *state_dir, const char *name, const struct sbx_err *err)
{
    json_t *j = json_pack("{s:s,s:s}", "code", err->code[0] ? err->code : "provider_error",
                          "message", err->msg);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s", state_dir, name);
    int r = text ? sbx_write_file_atomic(path, text, strlen(text), 0600) : -ENOMEM;
    free(text);
    return r;
}

/* Say why in provider_error.json and exit. */
static void relay_fail(struct relay *rl, int code, const struct sbx_err *err)
    __attribute__((noreturn));
static void relay_fail(struct relay *rl, int code, const struct sbx_err *err)
{
    fprintf(stderr, "sbx-shim provider: %s\n", err->msg);
    if (failure_save(rl->state_dir, "provider_error.json", err) < 0)
        fprintf(stderr, "sbx-shim provider: writing provider_error.json failed\n");
    /* Nothing half-made stays at the provider. */
    if (rl->sb.id[0]) {
        struct sbx_err derr = {0};
        if (provider_sandbox_delete(&rl->conn, rl->sb.id, &derr) < 0)
            fprintf(stderr, "sbx-shim provider: deleting %s: %s\n", rl->sb.id, derr.msg);
        _cleanup_free_ char *rec = sbx_xasprintf("%s/provider_sandbox.json", rl->state_dir);
        (void)unlink(rec);
    }
    _exit(code);
}

/* The provider sandbox recorded in state_dir, if any. */
static int record_load(const char *state_dir, struct record *rec)
{
    struct provider_sandbox *out = &rec->sb;
    rec->paused = false;
    rec->agent_pid = 0;
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_sandbox.json", state_dir);
    _cleanup_free_ char *text = NULL;
    memset(out, 0, sizeof(*out));
    if (sbx_read_file(path, PROVIDER_CONFIG_MAX, &text, NULL) < 0)
        return -ENOENT;
    json_t *j = json_loads(text, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *tok = json_string_value(json_object_get(j, "token"));
    const char *dom = json_string_value(json_object_get(j, "domain"));
    int r = -ENOENT;
    if (id && strlen(id) < sizeof(out->id)) {
        snprintf(out->id, sizeof(out->id), "%s", id);
        snprintf(out->token, sizeof(out->token), "%s", tok ? tok : "");
        snprintf(out->domain, sizeof(out->domain), "%s", dom ? dom : "");
        rec->paused = json_is_true(json_object_get(j, "paused"));
        rec->agent_pid = json_integer_value(json_object_get(j, "agent_pid"));
        r = 0;
    }
    json_decref(j);
    return r;
}

static int record_save(const char *state_dir, const struct provider_sandbox *sb, bool paused,
                       long long agent_pid)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_sandbox.json", state_dir);
    json_t *j = json_pack("{s:s,s:s,s:s,s:b,s:I}", "id", sb->id, "token", sb->token, "domain",
                          sb->domain, "paused", paused, "agent_pid", (json_int_t)agent_pid);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    int r = text ? sbx_write_file_atomic(path, text, strlen(text), 0600) : -ENOMEM;
    free(text);
    return r;
}

/* The stream thread's handler of one process event. */
static int on_event(json_t *msg, void *data)
{
    struct relay *rl = data;
    json_t *ev = json_object_get(msg, "event");
    json_t *start = json_object_get(ev, "start");
    json_t *d = json_object_get(ev, "data");
    json_t *end = json_object_get(ev, "end");
    if (start) {
        json_t *pid = json_object_get(start, "pid");
        long long p = json_is_integer(pid) ? json_integer_value(pid) : -1;
        if (sbx_write_all(rl->pid_pipe[1], &p, sizeof(p)) < 0)
            return -EPIPE;
    }
    if (d) {
        for (int fd = 1; fd <= 2; fd++) {
            json_t *b = json_object_get(d, fd == 1 ? "stdout" : "stderr");
            if (!json_is_string(b))
                continue;
            size_t len = json_string_length(b), n = 0;
            _cleanup_free_ unsigned char *raw = sbx_xmalloc(len / 4 * 3 + 3);
            if (sbx_base64_decode(json_string_value(b), len, raw, &n) < 0)
                return -EPROTO;
            /* The shim's pipe: blocking, so the shim's pace is the stream's. */
            if (sbx_write_all(fd, raw, n) < 0 && fd == 1)
                return -EPIPE;
        }
    }
    if (end) {
        json_t *code = json_object_get(end, "exitCode");
        rl->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 255;
        rl->got_end = true;
    }
    return 0;
}

static void *stream_main(void *data)
{
    struct relay *rl = data;
    rl->stream_r = provider_stream(&rl->conn, &rl->sb, rl->method, rl->msg, on_event, rl,
                                   &rl->stream_err);
    long long none = -1;
    (void)sbx_write_all(rl->pid_pipe[1], &none, sizeof(none)); /* the stream is over */
    return NULL;
}

/* Send buf as the agent's stdin; retried while the remote pipe is full. */
static int send_input(struct relay *rl, const char *buf, size_t n, struct sbx_err *err)
{
    _cleanup_free_ char *b64 = sbx_base64_encode(buf, n);
    json_t *msg = json_pack("{s:{s:I},s:{s:s}}", "process", "pid", (json_int_t)rl->pid, "input",
                            "stdin", b64);
    long long deadline = sbx_now_ms() + INPUT_RETRY_MAX_MS;
    int r;
    for (;;) {
        r = provider_rpc(&rl->conn, &rl->sb, "process.Process/SendInput", msg, NULL, err);
        if (r != -EIO || strcmp(err->code, "resource_exhausted") || sbx_now_ms() > deadline)
            break;
        struct timespec ts = {0, INPUT_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    json_decref(msg);
    return r;
}

/* Starts the stream thread (rl->method with rl->msg) and waits for the agent's pid:
 * 0 with rl->pid set, or -1 when the stream ended first (rl->stream_err says why). */
static int stream_begin(struct relay *rl)
{
    int r = pthread_create(&rl->thread, NULL, stream_main, rl);
    if (r != 0) {
        sbx_err_sys(&rl->stream_err, r, "pthread_create");
        return -1;
    }
    long long pid = -1;
    ssize_t got;
    while ((got = read(rl->pid_pipe[0], &pid, sizeof(pid))) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof(pid) || pid <= 0) {
        pthread_join(rl->thread, NULL);
        return -1;
    }
    rl->pid = pid;
    return 0;
}

/* Connect to the agent a paused provider sandbox kept (envd's process.Process/Connect by
 * its pid) and greet it as a restored agent, as the shim greets one runsc restored. */
static int agent_reconnect(struct relay *rl, long long pid)
{
    json_t *msg = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
    rl->method = "process.Process/Connect";
    rl->msg = msg;
    int r = stream_begin(rl);
    json_decref(msg);
    rl->msg = NULL;
    if (r < 0) {
        fprintf(stderr, "sbx-shim provider: the agent (pid %lld) is not there after the resume: "
                "%s; starting a new one\n", pid, rl->stream_err.msg[0] ? rl->stream_err.msg
                                                                    : "its stream ended");
        memset(&rl->stream_err, 0, sizeof(rl->stream_err));
        rl->got_end = false;
        rl->exit_code = -1;
        return -1;
    }
    char hello[96];
    int n = snprintf(hello, sizeof(hello), "{\"version\":%d,\"role\":\"daemon\",\"restored\":true}",
                     PROTO_VERSION);
    char frame[PROTO_HEADER_SIZE + sizeof(hello)];
    proto_header_encode((uint8_t *)frame, 0, PROTO_HELLO, 0, (uint32_t)n);
    memcpy(frame + PROTO_HEADER_SIZE, hello, (size_t)n);
    struct sbx_err err = {0};
    if (send_input(rl, frame, PROTO_HEADER_SIZE + (size_t)n, &err) < 0)
        relay_fail(rl, 125, &err); /* its stream is up but its stdin is not */
    fprintf(stderr, "sbx-shim provider: reconnected to the agent (pid %lld)\n", pid);
    int w = record_save(rl->state_dir, &rl->sb, false, pid);
    if (w < 0)
        fprintf(stderr, "sbx-shim provider: writing provider_sandbox.json: %s\n", strerror(-w));
    return 0;
}

/* The shim's bytes to the agent until the stream or the shim ends; exits with the agent's
 * status. */
static void relay_loop(struct relay *rl) __attribute__((noreturn));
static void relay_loop(struct relay *rl)
{
    struct sbx_err err = {0};
    _cleanup_free_ char *buf = sbx_xmalloc(INPUT_CHUNK);
    bool in_open = true;
    /* What the shim writes meanwhile waits in the pipe: one call's worth of room (the
     * default 64 KiB would cut every call to that), best effort (pipe-max-size). */
    (void)fcntl(0, F_SETPIPE_SZ, (int)INPUT_CHUNK);
    (void)sbx_set_nonblock(0);
    for (;;) {
        struct pollfd p[2] = {{.fd = rl->pid_pipe[0], .events = POLLIN},
                              {.fd = in_open ? 0 : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break; /* the stream ended: the agent (or the provider sandbox) is gone */
        if (p[1].revents) {
            /* Everything waiting, up to one call's worth: fewer, larger SendInput calls. */
            size_t got = 0;
            ssize_t n = 1;
            while (got < INPUT_CHUNK && (n = read(0, buf + got, INPUT_CHUNK - got)) > 0)
                got += (size_t)n;
            if (got > 0 && send_input(rl, buf, got, &err) < 0) {
                fprintf(stderr, "sbx-shim provider: SendInput: %s\n", err.msg);
                break;
            }
            if (got == 0 && (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)))
                in_open = false; /* the shim is going: the provider sandbox's end follows */
        }
    }
    pthread_join(rl->thread, NULL);
    if (!rl->got_end) {
        fprintf(stderr, "sbx-shim provider: the agent's stream broke: %s\n",
                rl->stream_err.msg[0] ? rl->stream_err.msg : "no end event");
        _exit(255);
    }
    fprintf(stderr, "sbx-shim provider: the agent exited with %d\n", rl->exit_code);
    _exit(rl->exit_code & 0xff);
}

/* A create the provider did not answer in time may still have made its sandbox: what it
 * lists with this sandbox's sbx_id goes (nothing half-made stays at the provider). */
static void delete_unanswered(struct relay *rl, const char *id)
{
    json_t *list = NULL;
    struct sbx_err err = {0};
    if (provider_sandbox_list(&rl->conn, &list, &err) < 0) {
        fprintf(stderr, "sbx-shim provider: listing after a timed-out create: %s\n", err.msg);
        return;
    }
    size_t i;
    json_t *ps;
    json_array_foreach(list, i, ps)
    {
        const char *sid = json_string_value(json_object_get(ps, "sandboxID"));
        const char *of = json_string_value(
            json_object_get(json_object_get(ps, "metadata"), PROVIDER_META_ID));
        if (!sid || !of || strcmp(of, id))
            continue;
        if (provider_sandbox_delete(&rl->conn, sid, &err) < 0)
            fprintf(stderr, "sbx-shim provider: deleting %s after a timed-out create: %s\n",
                    sid, err.msg);
        else
            fprintf(stderr, "sbx-shim provider: deleted %s, made by a timed-out create\n", sid);
    }
    json_decref(list);
}

static void relay_main(const struct shim *s) __attribute__((noreturn));
static void relay_main(const struct shim *s)
{
    const char *id = s->id, *state_dir = s->state_dir;
    struct relay rl = {.state_dir = state_dir, .exit_code = -1};
    struct sbx_err err = {0};
    json_t *cfg = config_load(s, &err);
    if (!cfg || provider_conn_from_json(json_object_get(cfg, "conn"), &rl.conn, &err) < 0)
        relay_fail(&rl, 125, &err);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        sbx_err_set(&err, ENOMEM, "internal", "curl_global_init failed");
        relay_fail(&rl, 125, &err);
    }
    long timeout_s = (long)json_integer_value(json_object_get(cfg, "timeout_s"));
    long long t0 = sbx_now_ms();
    /* A provider sandbox recorded here is an earlier start's: one sbx paused is resumed
     * (sbx's resume), any other goes first (a restart). */
    struct record old;
    bool resumed = false;
    if (record_load(state_dir, &old) == 0) {
        if (old.paused) {
            resumed = provider_sandbox_connect(&rl.conn, old.sb.id, timeout_s, &rl.sb, &err) == 0;
            if (resumed)
                fprintf(stderr, "sbx-shim provider: sandbox %s resumed in %lld ms\n", rl.sb.id,
                        sbx_now_ms() - t0);
            else
                fprintf(stderr, "sbx-shim provider: resuming %s: %s; making a new one\n",
                        old.sb.id, err.msg);
        }
        if (!resumed && provider_sandbox_delete(&rl.conn, old.sb.id, &err) < 0)
            fprintf(stderr, "sbx-shim provider: deleting the earlier %s: %s\n", old.sb.id,
                    err.msg);
    }
    if (!resumed) {
        if (provider_sandbox_create(&rl.conn,
                                    json_string_value(json_object_get(cfg, "template_id")),
                                    timeout_s, json_object_get(cfg, "env"),
                                    json_object_get(cfg, "metadata"),
                                    json_object_get(cfg, "network"), &rl.sb, &err) < 0) {
            if (!strcmp(err.code, "provider_timeout"))
                delete_unanswered(&rl, id);
            relay_fail(&rl, 125, &err);
        }
        fprintf(stderr, "sbx-shim provider: sandbox %s created in %lld ms\n", rl.sb.id,
                sbx_now_ms() - t0);
    }
    int r = record_save(state_dir, &rl.sb, false, 0);
    if (r < 0) {
        sbx_err_sys(&err, -r, "writing provider_sandbox.json");
        relay_fail(&rl, 125, &err);
    }
    if (pipe2(rl.pid_pipe, O_CLOEXEC) < 0) {
        sbx_err_sys(&err, errno, "pipe");
        relay_fail(&rl, 125, &err);
    }
    /* After a resume the agent may still be there (the provider kept its memory): the
     * stream reconnects to it, and it is greeted as a restored one. Its boot id tells sbxd
     * whether it was (restored: true), never this guess. */
    if (resumed && old.agent_pid > 0 && agent_reconnect(&rl, old.agent_pid) == 0) {
        relay_loop(&rl);
    }
    const char *agent = json_string_value(json_object_get(cfg, "agent_path"));
    _cleanup_close_ int afd = agent ? open(agent, O_RDONLY | O_CLOEXEC) : -1;
    if (afd < 0) {
        sbx_err_set(&err, errno, "internal", "opening the agent %s: %s", agent ? agent : "(none)",
                    strerror(errno));
        relay_fail(&rl, 125, &err);
    }
    _cleanup_free_ char *up = sbx_xasprintf(AGENT_UPLOAD_DIR "/.sbx-agent-%s", rl.sb.id);
    if (provider_upload(&rl.conn, &rl.sb, up, afd, &err) < 0)
        relay_fail(&rl, 125, &err);
    fprintf(stderr, "sbx-shim provider: agent uploaded at %lld ms\n", sbx_now_ms() - t0);

    json_t *msg = json_pack("{s:{s:s,s:[s,s,s,s],s:{}},s:b}", "process", "cmd", "/bin/sh", "args",
                            "-c", AGENT_BOOT_SCRIPT, "sbx-agent-boot", up, "envs", "stdin", 1);
    rl.method = "process.Process/Start";
    rl.msg = msg;
    if (stream_begin(&rl) < 0) {
        if (!rl.stream_err.msg[0])
            sbx_err_set(&rl.stream_err, EPROTO, "provider_error",
                        "envd's process.Process/Start ended without starting the agent");
        relay_fail(&rl, 125, &rl.stream_err);
    }
    fprintf(stderr, "sbx-shim provider: agent started as pid %lld at %lld ms\n", rl.pid,
            sbx_now_ms() - t0);
    if ((r = record_save(state_dir, &rl.sb, false, rl.pid)) < 0) {
        sbx_err_sys(&err, -r, "writing provider_sandbox.json");
        relay_fail(&rl, 125, &err);
    }
    relay_loop(&rl);
}

void shim_provider_relay(struct shim *s)
{
    relay_main(s);
}

void shim_provider_cmd(struct shim *s, const char *what)
{
    if (strcmp(what, "kill") && strcmp(what, "delete"))
        return;
    struct record rec;
    if (record_load(s->state_dir, &rec) < 0)
        return; /* none made, or already deleted */
    /* A paused one stays at the provider until it is resumed, or killed (a destroy). */
    if (!strcmp(what, "delete") && rec.paused)
        return;
    _cleanup_free_ char *marker = sbx_xasprintf("%s/" RT_PROVIDER_PAUSE_FILE, s->state_dir);
    bool pause = !strcmp(what, "kill") && access(marker, F_OK) == 0;
    struct sbx_err err = {0};
    json_t *cfg = config_load(s, &err);
    if (!cfg) {
        shim_log(s, "provider %s: %s", what, err.msg);
        return;
    }
    struct provider_conn conn;
    long long t0 = sbx_now_ms();
    int r = provider_conn_from_json(json_object_get(cfg, "conn"), &conn, &err);
    if (r == 0)
        r = pause ? provider_sandbox_pause(&conn, rec.sb.id, &err)
                  : provider_sandbox_delete(&conn, rec.sb.id, &err);
    json_decref(cfg);
    if (pause) {
        /* Recorded as paused even when the provider refused: the sandbox (and its agent)
         * then still runs there, sbxd answers the refusal (provider_pause_error.json) and
         * starts a new shim at once, whose connect finds it as it was. */
        if (r < 0) {
            shim_log(s, "provider pause of %s: %s (kept running)", rec.sb.id, err.msg);
            int w = failure_save(s->state_dir, RT_PROVIDER_PAUSE_ERROR_FILE, &err);
            if (w < 0)
                shim_log(s, "provider pause: writing " RT_PROVIDER_PAUSE_ERROR_FILE ": %s",
                         strerror(-w));
        } else
            shim_log(s, "provider pause: sandbox %s paused in %lld ms", rec.sb.id,
                     sbx_now_ms() - t0);
        int w = record_save(s->state_dir, &rec.sb, true, rec.agent_pid);
        if (w < 0)
            shim_log(s, "provider pause: writing provider_sandbox.json: %s", strerror(-w));
        (void)unlink(marker);
        /* Its stream may outlive the pause: the relay goes now, the agent stays. */
        if (s->run_pid > 0)
            (void)kill(s->run_pid, SIGKILL);
        return;
    }
    if (r < 0) {
        shim_log(s, "provider %s of %s: %s", what, rec.sb.id, err.msg);
        return;
    }
    shim_log(s, "provider %s: sandbox %s deleted in %lld ms", what, rec.sb.id, sbx_now_ms() - t0);
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_sandbox.json", s->state_dir);
    (void)unlink(path);
}
