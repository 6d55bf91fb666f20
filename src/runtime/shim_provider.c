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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../common/text.h"
#include "../common/util.h"
#include "provider_api.h"
#include "rt.h"
#include "shim.h"
#include "shim_provider.h"

#define PROVIDER_CONFIG_MAX (256u * 1024u)
/* One SendInput's bytes: well under the agent's PROCESS_INPUT_MAX base64 characters. */
#define INPUT_CHUNK (32u * 1024u)
/* A stdin the remote agent has not drained yet (resource_exhausted) is retried this often,
 * for at most INPUT_RETRY_MAX_MS. */
#define INPUT_RETRY_MS 2
#define INPUT_RETRY_MAX_MS 30000
/* Where the agent is uploaded (the provider's user can write its home) and run from. */
#define AGENT_UPLOAD_DIR "/home/user"
#define AGENT_BOOT_SCRIPT                                                                         \
    "a=/tmp/.sbx-agent; cp \"$1\" \"$a\" && chmod 0700 \"$a\" && rm -f \"$1\" && exec \"$a\""

struct relay {
    struct provider_conn conn;
    struct provider_sandbox sb;
    const char *state_dir;
    int pid_pipe[2];     /* the stream thread tells the main thread the agent's pid, or -1 */
    long long pid;
    int exit_code;       /* from the end event; -1 before */
    bool got_end;
    struct sbx_err stream_err;
    int stream_r;
};

/* Say why in provider_error.json and exit. */
static void relay_fail(struct relay *rl, int code, const struct sbx_err *err)
    __attribute__((noreturn));
static void relay_fail(struct relay *rl, int code, const struct sbx_err *err)
{
    fprintf(stderr, "sbx-shim provider: %s\n", err->msg);
    json_t *j = json_pack("{s:s,s:s}", "code", err->code[0] ? err->code : "provider_error",
                          "message", err->msg);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_error.json", rl->state_dir);
    if (text && sbx_write_file_atomic(path, text, strlen(text), 0600) < 0)
        fprintf(stderr, "sbx-shim provider: writing %s failed\n", path);
    free(text);
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
static int sandbox_load(const char *state_dir, struct provider_sandbox *out)
{
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
        r = 0;
    }
    json_decref(j);
    return r;
}

static int sandbox_save(const char *state_dir, const struct provider_sandbox *sb)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_sandbox.json", state_dir);
    json_t *j = json_pack("{s:s,s:s,s:s}", "id", sb->id, "token", sb->token, "domain", sb->domain);
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
    _cleanup_free_ char *path = sbx_xasprintf(AGENT_UPLOAD_DIR "/.sbx-agent-%s", rl->sb.id);
    json_t *msg = json_pack("{s:{s:s,s:[s,s,s,s],s:{}},s:b}", "process", "cmd", "/bin/sh", "args",
                            "-c", AGENT_BOOT_SCRIPT, "sbx-agent-boot", path, "envs", "stdin", 1);
    rl->stream_r = provider_stream(&rl->conn, &rl->sb, "process.Process/Start", msg, on_event, rl,
                                   &rl->stream_err);
    json_decref(msg);
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

static void relay_main(const char *id, const char *state_dir) __attribute__((noreturn));
static void relay_main(const char *id, const char *state_dir)
{
    struct relay rl = {.state_dir = state_dir, .exit_code = -1};
    struct sbx_err err = {0};
    _cleanup_free_ char *cfg_path = sbx_xasprintf("%s/provider.json", state_dir);
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(cfg_path, PROVIDER_CONFIG_MAX, &text, NULL) < 0) {
        sbx_err_set(&err, errno, "internal", "reading %s: %s", cfg_path, strerror(errno));
        relay_fail(&rl, 125, &err);
    }
    json_t *cfg = json_loads(text, 0, NULL);
    if (!cfg || provider_conn_from_json(json_object_get(cfg, "conn"), &rl.conn, &err) < 0) {
        if (!err.msg[0])
            sbx_err_set(&err, EINVAL, "internal", "%s is not JSON", cfg_path);
        relay_fail(&rl, 125, &err);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        sbx_err_set(&err, ENOMEM, "internal", "curl_global_init failed");
        relay_fail(&rl, 125, &err);
    }
    /* A provider sandbox recorded here is an earlier start's (a restart): it goes first. */
    struct provider_sandbox old;
    if (sandbox_load(state_dir, &old) == 0 && provider_sandbox_delete(&rl.conn, old.id, &err) < 0)
        fprintf(stderr, "sbx-shim provider: deleting the earlier %s: %s\n", old.id, err.msg);
    long long t0 = sbx_now_ms();
    if (provider_sandbox_create(&rl.conn, json_string_value(json_object_get(cfg, "template_id")),
                                (long)json_integer_value(json_object_get(cfg, "timeout_s")),
                                json_object_get(cfg, "env"), json_object_get(cfg, "metadata"),
                                json_object_get(cfg, "network"), &rl.sb, &err) < 0)
        relay_fail(&rl, 125, &err);
    int r = sandbox_save(state_dir, &rl.sb);
    if (r < 0) {
        sbx_err_sys(&err, -r, "writing provider_sandbox.json");
        relay_fail(&rl, 125, &err);
    }
    fprintf(stderr, "sbx-shim provider: sandbox %s created in %lld ms\n", rl.sb.id,
            sbx_now_ms() - t0);
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

    if (pipe2(rl.pid_pipe, O_CLOEXEC) < 0) {
        sbx_err_sys(&err, errno, "pipe");
        relay_fail(&rl, 125, &err);
    }
    pthread_t th;
    if ((r = pthread_create(&th, NULL, stream_main, &rl)) != 0) {
        sbx_err_sys(&err, r, "pthread_create");
        relay_fail(&rl, 125, &err);
    }
    long long pid = -1;
    ssize_t got;
    while ((got = read(rl.pid_pipe[0], &pid, sizeof(pid))) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof(pid) || pid <= 0) {
        pthread_join(th, NULL);
        if (!rl.stream_err.msg[0])
            sbx_err_set(&rl.stream_err, EPROTO, "provider_error",
                        "envd's process.Process/Start ended without starting the agent");
        relay_fail(&rl, 125, &rl.stream_err);
    }
    rl.pid = pid;
    fprintf(stderr, "sbx-shim provider: agent started as pid %lld at %lld ms\n", pid,
            sbx_now_ms() - t0);

    _cleanup_free_ char *buf = sbx_xmalloc(INPUT_CHUNK);
    bool in_open = true;
    for (;;) {
        struct pollfd p[2] = {{.fd = rl.pid_pipe[0], .events = POLLIN},
                              {.fd = in_open ? 0 : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break; /* the stream ended: the agent (or the provider sandbox) is gone */
        if (p[1].revents) {
            ssize_t n = read(0, buf, INPUT_CHUNK);
            if (n > 0 && send_input(&rl, buf, (size_t)n, &err) < 0) {
                fprintf(stderr, "sbx-shim provider: SendInput: %s\n", err.msg);
                break;
            }
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                in_open = false; /* the shim is going: the provider sandbox's end follows */
        }
    }
    pthread_join(th, NULL);
    if (!rl.got_end) {
        fprintf(stderr, "sbx-shim provider: the agent's stream broke: %s\n",
                rl.stream_err.msg[0] ? rl.stream_err.msg : "no end event");
        _exit(255);
    }
    fprintf(stderr, "sbx-shim provider: the agent exited with %d\n", rl.exit_code);
    _exit(rl.exit_code & 0xff);
}

void shim_provider_relay(struct shim *s)
{
    relay_main(s->id, s->state_dir);
}

void shim_provider_cmd(struct shim *s, const char *what)
{
    if (strcmp(what, "kill") && strcmp(what, "delete"))
        return;
    struct provider_sandbox sb;
    if (sandbox_load(s->state_dir, &sb) < 0)
        return; /* none made, or already deleted */
    _cleanup_free_ char *cfg_path = sbx_xasprintf("%s/provider.json", s->state_dir);
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(cfg_path, PROVIDER_CONFIG_MAX, &text, NULL) < 0) {
        shim_log(s, "provider %s: reading %s: %s", what, cfg_path, strerror(errno));
        return;
    }
    json_t *cfg = json_loads(text, 0, NULL);
    struct provider_conn conn;
    struct sbx_err err = {0};
    long long t0 = sbx_now_ms();
    int r = provider_conn_from_json(json_object_get(cfg, "conn"), &conn, &err);
    if (r == 0)
        r = provider_sandbox_delete(&conn, sb.id, &err);
    json_decref(cfg);
    if (r < 0) {
        shim_log(s, "provider %s of %s: %s", what, sb.id, err.msg);
        return;
    }
    shim_log(s, "provider %s: sandbox %s deleted in %lld ms", what, sb.id, sbx_now_ms() - t0);
    _cleanup_free_ char *rec = sbx_xasprintf("%s/provider_sandbox.json", s->state_dir);
    (void)unlink(rec);
}
