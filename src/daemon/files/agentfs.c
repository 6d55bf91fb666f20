#include "agentfs.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/channel.h"
#include "../sandbox/manager.h"
#include "agentfs_src.h"

/* How long one operation may take in the sandbox (a deep listing, a large read). */
#define AGENTFS_TIMEOUT_MS 60000

struct agentfs {
    struct agentcall *call;
    agentfs_done_fn done;
    void *data;
    bool raw; /* "read": stdout is the file's bytes */
    bool overflow;
    uint8_t *buf;
    size_t len, cap;
};

static void fs_free(struct agentfs *f)
{
    free(f->buf);
    free(f);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct agentfs *f = data;
    if (ch != PROTO_CH_STDOUT || f->overflow)
        return;
    if (f->len + len > AGENTFS_OUT_MAX) {
        f->overflow = true;
        return;
    }
    if (f->len + len > f->cap) {
        f->cap = f->len + len > 2 * f->cap ? f->len + len : 2 * f->cap;
        f->buf = sbx_xrealloc(f->buf, f->cap);
    }
    memcpy(f->buf + f->len, buf, len);
    f->len += len;
}

/* The helper's errno as our error code (envd's answers for the same failures). */
static void errno_error(json_t *o, struct sbx_err *err)
{
    int e = (int)json_integer_value(json_object_get(o, "errno"));
    const char *msg = json_string_value(json_object_get(o, "message")) ?: "failed";
    const char *code = e == ENOENT                            ? "file_not_found"
                       : e == EACCES || e == EPERM || e == EROFS ? "path_permission_denied"
                       : e == EEXIST                          ? "dir_exists"
                       : e == ENOSPC || e == EDQUOT           ? "workspace_too_large"
                       : e == ENOTDIR || e == EISDIR || e == EINVAL || e == ENAMETOOLONG ||
                               e == ELOOP || e == EXDEV
                           ? "invalid_path"
                       : e == EFBIG ? "file_too_large"
                                    : "internal";
    sbx_err_set(err, e, code, "%s", msg);
}

static void on_done(json_t *result, const struct sbx_err *aerr, void *data)
{
    struct agentfs *f = data;
    struct sbx_err err = {0};
    json_t *o = NULL;
    if (aerr) {
        f->done(NULL, NULL, 0, aerr, f->data);
        fs_free(f);
        return;
    }
    long long code = json_integer_value(json_object_get(result, "exit_code"));
    if (f->overflow) {
        sbx_err_set(&err, EFBIG, "file_too_large", "the answer is larger than %u bytes",
                    AGENTFS_OUT_MAX);
    } else if (code == 0 && f->raw) {
        f->done(NULL, f->buf, f->len, NULL, f->data);
        fs_free(f);
        return;
    } else if ((code == 0 || code == 3) &&
               (o = json_loadb((const char *)f->buf, f->len, 0, NULL)) && json_is_object(o)) {
        if (code == 3)
            errno_error(o, &err);
    } else {
        sbx_err_set(&err, EIO, "internal", "the file helper failed (exit %lld)", code);
    }
    f->done(err.code[0] ? NULL : json_object_get(o, "ok"), NULL, 0, err.code[0] ? &err : NULL,
            f->data);
    json_decref(o);
    fs_free(f);
}

static const struct agentcall_ops fs_ops = {.on_data = on_data, .on_done = on_done};

/* The exec that runs the helper with arg (JSON) as user (NULL: the sandbox's). */
static json_t *helper_op(json_t *req, const char *user, long long timeout_ms, bool input)
{
    _cleanup_free_ char *arg = json_dumps(req, JSON_COMPACT);
    /* -I: the user's PYTHON* variables and site packages cannot change what the helper does. */
    json_t *op = json_pack("{s:s,s:[s,s,s,s,s],s:I,s:b}", "op", "exec", "argv", "python3", "-I",
                           "-c", agentfs_src, arg, "timeout_ms", (json_int_t)timeout_ms, "stdin",
                           input);
    if (user) {
        json_object_set_new(op, "user", json_string(user));
        if (!strcmp(user, "root"))
            json_object_set_new(op, "env", json_pack("[s]", "HOME=/root"));
    }
    return op;
}

int agentfs_start(struct sandbox *sb, const char *user, json_t *req, agentfs_done_fn done,
                  void *data, struct agentfs **out, struct sbx_err *err)
{
    if (!json_object_get(req, "max"))
        json_object_set_new(req, "max", json_integer(AGENTFS_LIST_MAX));
    if (!strcmp(json_string_value(json_object_get(req, "op")) ?: "", "read"))
        json_object_set_new(req, "max", json_integer(AGENTFS_OUT_MAX));
    struct agentfs *f = sbx_xcalloc(1, sizeof(*f));
    f->done = done;
    f->data = data;
    f->raw = !strcmp(json_string_value(json_object_get(req, "op")), "read");
    json_t *op = helper_op(req, user, AGENTFS_TIMEOUT_MS, false);
    json_decref(req);
    if (agentcall_start(sb, op, &fs_ops, f, &f->call, err) < 0) {
        fs_free(f);
        return -EIO;
    }
    if (out)
        *out = f;
    return 0;
}

void agentfs_cancel(struct agentfs *f)
{
    agentcall_cancel(f->call, false);
    fs_free(f);
}

/* --- streamed operations ----------------------------------------------------------------- */

/* The helper's error report on stderr is one short JSON object. */
#define AGENTFS_STDERR_MAX 4096

struct agentfs_stream {
    struct sandbox *sb;
    json_t *op;
    struct chan_stream *st;
    const struct agentfs_stream_ops *ops;
    void *data;
    size_t room;
    char err_buf[AGENTFS_STDERR_MAX];
    size_t err_len;
};

static void stream_free(struct agentfs_stream *s)
{
    json_decref(s->op);
    free(s);
}

static void stream_finish(struct agentfs_stream *s, const struct sbx_err *err)
{
    s->ops->on_done(err, s->data);
    stream_free(s);
}

static void st_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len,
                    void *data)
{
    struct agentfs_stream *s = data;
    if (ch == PROTO_CH_STDOUT) {
        s->ops->on_data(buf, len, s->data);
        return;
    }
    size_t take = len < sizeof(s->err_buf) - s->err_len ? len : sizeof(s->err_buf) - s->err_len;
    memcpy(s->err_buf + s->err_len, buf, take);
    s->err_len += take;
    (void)channel_credit(st, ch, (uint32_t)len, NULL);
}

static void st_exit(struct chan_stream *st, json_t *result, void *data)
{
    struct agentfs_stream *s = data;
    struct sbx_err err = {0};
    long long code = json_integer_value(json_object_get(result, "exit_code"));
    json_t *o = NULL;
    s->st = NULL;
    if (code == 3 && (o = json_loadb(s->err_buf, s->err_len, 0, NULL)) && json_is_object(o))
        errno_error(o, &err);
    else if (json_is_true(json_object_get(result, "timed_out")))
        sbx_err_set(&err, ETIMEDOUT, "timeout", "the file helper ran out of time");
    else if (code != 0)
        sbx_err_set(&err, EIO, "internal", "the file helper failed (exit %lld)", code);
    json_decref(o);
    stream_finish(s, err.code[0] ? &err : NULL);
}

static void st_error(struct chan_stream *st, const struct sbx_err *aerr, void *data)
{
    struct agentfs_stream *s = data;
    struct sbx_err err = *aerr;
    s->st = NULL;
    if (!strcmp(err.code, "channel_closed"))
        snprintf(err.code, sizeof(err.code), "sandbox_not_running");
    stream_finish(s, &err);
}

static void st_window(struct chan_stream *st, unsigned ch, uint32_t credit, void *data)
{
    struct agentfs_stream *s = data;
    if (ch != PROTO_CH_STDIN)
        return;
    s->room += credit;
    if (s->ops->on_room)
        s->ops->on_room(s->data);
}

static void st_writable(struct chan_stream *st, void *data)
{
    struct agentfs_stream *s = data;
    if (s->ops->on_room)
        s->ops->on_room(s->data);
}

static const struct chan_stream_ops stream_ops = {
    .on_data = st_data,
    .on_exit = st_exit,
    .on_error = st_error,
    .on_window = st_window,
    .on_writable = st_writable,
};

static int stream_open(struct agentfs_stream *s, struct sbx_err *err)
{
    if (!s->sb->chan || s->sb->ended)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           s->sb->rec.id);
    int r = channel_open(s->sb->chan, s->op, &stream_ops, s, &s->st, err);
    if (r < 0)
        return r;
    /* The agent's own window (1 MiB) and no more: through a provider, sbx's envd queues
     * what the agent sends without backpressure of its own, and more in flight than that
     * overflowed its queue and ended the provider sandbox's stream. */
    channel_manual_credit(s->st);
    if (json_is_true(json_object_get(s->op, "stdin"))) {
        s->room = PROTO_WINDOW_INIT;
        if (s->ops->on_room)
            s->ops->on_room(s->data);
    }
    return 0;
}

static void stream_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct agentfs_stream *s = data;
    struct sbx_err e = {0};
    if (err)
        e = *err;
    else if (stream_open(s, &e) == 0)
        return;
    stream_finish(s, &e);
}

int agentfs_stream_start(struct sandbox *sb, json_t *req, bool input,
                         const struct agentfs_stream_ops *ops, void *data,
                         struct agentfs_stream **out, struct sbx_err *err)
{
    struct agentfs_stream *s = sbx_xcalloc(1, sizeof(*s));
    s->sb = sb;
    s->ops = ops;
    s->data = data;
    s->op = helper_op(req, NULL, AGENTFS_STREAM_TIMEOUT_MS, input);
    json_decref(req);
    *out = s;
    if (!sb->ready) {
        sandbox_when_ready(sb, stream_ready, s);
        return 0;
    }
    int r = stream_open(s, err);
    if (r < 0) {
        *out = NULL;
        stream_free(s);
    }
    return r;
}

size_t agentfs_stream_room(const struct agentfs_stream *s)
{
    return s->st && !channel_congested(s->st) ? s->room : 0;
}

int agentfs_stream_write(struct agentfs_stream *s, const void *buf, size_t len,
                         struct sbx_err *err)
{
    if (len > agentfs_stream_room(s))
        return sbx_err_set(err, ENOBUFS, "internal", "more input than the agent's window");
    int r = channel_send(s->st, PROTO_CH_STDIN, buf, len, err);
    if (r == 0)
        s->room -= len;
    return r;
}

int agentfs_stream_end_input(struct agentfs_stream *s, struct sbx_err *err)
{
    if (!s->st)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "the stream is not open");
    return channel_send_eof(s->st, PROTO_CH_STDIN, err);
}

void agentfs_stream_credit(struct agentfs_stream *s, size_t n)
{
    if (s->st && n)
        (void)channel_credit(s->st, PROTO_CH_STDOUT, (uint32_t)n, NULL);
}

void agentfs_stream_cancel(struct agentfs_stream *s)
{
    if (!s->st) {
        sandbox_drop_waiter(s->sb, s);
    } else {
        (void)channel_signal(s->st, SIGTERM, NULL);
        channel_detach(s->st);
    }
    stream_free(s);
}
