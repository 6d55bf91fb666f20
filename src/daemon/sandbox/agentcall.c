#include "agentcall.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../../common/util.h"
#include "channel.h"
#include "manager.h"

struct agentcall {
    struct sandbox *sb;
    json_t *req;
    struct chan_stream *stream;
    const struct agentcall_ops *ops;
    void *data;
};

static void call_free(struct agentcall *c)
{
    json_decref(c->req);
    free(c);
}

/* Agent codes that mean something to the caller keep their name; the rest are ours. */
static void map_error(struct sbx_err *e)
{
    static const char *const passed[] = {
        "session_not_found",    "session_exists",       "too_many_sessions",  "process_not_found",
        "process_not_running",  "too_many_processes",   "invalid_cwd",        "pty_not_found",
        "pty_not_running",      "pty_input_full",       "too_many_ptys",      "too_many_terminals",
        "snapshot_unsupported", "process_stdin_closed", "process_stdin_full", "process_limit",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(passed); i++)
        if (!strcmp(e->code, passed[i]))
            return;
    snprintf(e->code, sizeof(e->code), "%s",
             !strcmp(e->code, "channel_closed") ? "sandbox_not_running" : "internal");
}

static void finish(struct agentcall *c, json_t *result, const struct sbx_err *err)
{
    c->ops->on_done(result, err, c->data);
    call_free(c);
}

static void on_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct agentcall *c = data;
    if (c->ops->on_data)
        c->ops->on_data(ch, buf, len, c->data);
}

static void on_exit_frame(struct chan_stream *st, json_t *result, void *data)
{
    finish(data, result, NULL);
}

static void on_error_frame(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct sbx_err e = *err;
    map_error(&e);
    finish(data, NULL, &e);
}

static const struct chan_stream_ops stream_ops = {
    .on_data = on_data,
    .on_exit = on_exit_frame,
    .on_error = on_error_frame,
};

static int open_stream(struct agentcall *c, struct sbx_err *err)
{
    struct sandbox *sb = c->sb;
    if (!sb->chan || sb->ended)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           sb->rec.id);
    int r = channel_open(sb->chan, c->req, &stream_ops, c, &c->stream, err);
    if (r == 0 && c->ops->manual_credit)
        channel_manual_credit(c->stream);
    return r;
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct agentcall *c = data;
    struct sbx_err e = {0};
    if (err)
        e = *err;
    else if (open_stream(c, &e) == 0)
        return;
    finish(c, NULL, &e);
}

int agentcall_start(struct sandbox *sb, json_t *req, const struct agentcall_ops *ops, void *data,
                    struct agentcall **out, struct sbx_err *err)
{
    struct agentcall *c = sbx_xcalloc(1, sizeof(*c));
    c->sb = sb;
    c->req = req;
    c->ops = ops;
    c->data = data;
    if (!sb->ready) {
        sandbox_when_ready(sb, on_ready, c);
    } else {
        int r = open_stream(c, err);
        if (r < 0) {
            call_free(c);
            return r;
        }
    }
    if (out)
        *out = c;
    return 0;
}

void agentcall_credit(struct agentcall *c, unsigned ch, size_t n)
{
    /* A closed channel needs no credit: the call's on_done reports its end. */
    if (c->stream && n)
        (void)channel_credit(c->stream, ch, (uint32_t)n, NULL);
}

void agentcall_cancel(struct agentcall *c, bool stop)
{
    if (!c->stream) {
        sandbox_drop_waiter(c->sb, c);
    } else {
        /* SIGNAL on a log stream ends it (docs/protocol.md); its EXIT is then dropped. */
        if (stop)
            (void)channel_signal(c->stream, SIGTERM, NULL);
        channel_detach(c->stream);
    }
    call_free(c);
}
