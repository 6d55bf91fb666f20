#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../common/util.h"
#include "agent.h"
#include "fatal.h"
#include "stream.h"

static void conn_out_cb(struct loop *l, int fd, uint32_t events, void *data);
static void conn_in_cb(struct loop *l, int fd, uint32_t events, void *data);

bool conn_paused(const struct agent *a)
{
    return a->conn.paused;
}

/* Handle buffered frames until the decoder is empty or the output pauses.
 * A malformed header cannot be resynchronised: the connection is dead. */
static void conn_drain_frames(struct agent *a)
{
    struct conn *c = &a->conn;
    while (!c->paused) {
        struct proto_frame f;
        int r = proto_decoder_next(c->dec, &f);
        if (r == 0)
            return;
        if (r < 0)
            agent_die(a, 2, "malformed frame header from the daemon (%s)", strerror(-r));
        c->on_frame(a, &f);
    }
}

static void conn_update_in(struct agent *a)
{
    struct conn *c = &a->conn;
    if (c->paused && c->in_w) {
        loop_watch_del(a->loop, c->in_w);
        c->in_w = NULL;
    } else if (!c->paused && !c->in_w) {
        int r = loop_watch_add(a->loop, c->in_fd, EPOLLIN, conn_in_cb, a, &c->in_w);
        if (r < 0)
            agent_die(a, 1, "watching the input fd: %s", strerror(-r));
    }
}

/* Write what the fd takes and keep the EPOLLOUT watch and the paused flag in step.
 * Only the top-level EPOLLOUT callback (from_loop) un-pauses: un-pausing resumes
 * streams and handles queued input frames, which must not happen re-entrantly
 * from inside conn_send. A paused connection therefore keeps its EPOLLOUT watch
 * even when empty, so that callback runs soon. */
static void conn_flush(struct agent *a, bool from_loop)
{
    struct conn *c = &a->conn;
    int r = proto_outq_flush(c->outq, c->out_fd);
    if (r < 0)
        agent_die(a, 1, "writing to the daemon: %s", strerror(-r));
    size_t left = proto_outq_len(c->outq);
    bool unpause = c->paused && left < CONN_OUTQ_LOW && from_loop;
    if (!c->paused && left > CONN_OUTQ_HIGH) {
        c->paused = true;
        conn_update_in(a);
    }
    bool want_out = left > 0 || (c->paused && !unpause);
    if (want_out && !c->out_w) {
        r = loop_watch_add(a->loop, c->out_fd, EPOLLOUT, conn_out_cb, a, &c->out_w);
        if (r < 0)
            agent_die(a, 1, "watching the output fd: %s", strerror(-r));
    } else if (!want_out && c->out_w) {
        loop_watch_del(a->loop, c->out_w);
        c->out_w = NULL;
    }
    if (unpause) {
        c->paused = false;
        conn_update_in(a);
        agent_resume_streams(a);
        /* Frames left in the decoder while paused: nothing else would wake us for them. */
        conn_drain_frames(a);
    }
}

static void conn_out_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    conn_flush(data, true);
}

static void conn_in_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct agent *a = data;
    struct conn *c = &a->conn;
    /* Frames from an earlier read come first (the decoder is bounded). */
    conn_drain_frames(a);
    if (c->paused)
        return;
    ssize_t n = proto_decoder_read(c->dec, fd);
    if (n == -EINTR || n == -EAGAIN)
        return;
    if (n == -EMSGSIZE)
        agent_die(a, 2, "frame decoder overflow (%s)", strerror(EMSGSIZE));
    if (n < 0)
        agent_die(a, 1, "reading from the daemon: %s", strerror((int)-n));
    if (n == 0) {
        /* The shim holds this pipe for the sandbox's whole life: EOF means it is gone. */
        conn_flush_now(a);
        agent_die(a, 0, NULL);
    }
    conn_drain_frames(a);
}

int conn_init(struct agent *a, int in_fd, int out_fd, conn_frame_fn on_frame)
{
    struct conn *c = &a->conn;
    c->on_frame = on_frame;
    c->in_fd = in_fd;
    c->out_fd = out_fd;
    int r = sbx_set_nonblock(in_fd);
    if (r < 0)
        return r;
    r = sbx_set_nonblock(out_fd);
    if (r < 0)
        return r;
    c->dec = proto_decoder_new();
    c->outq = proto_outq_new(CONN_OUTQ_MAX);
    return loop_watch_add(a->loop, in_fd, EPOLLIN, conn_in_cb, a, &c->in_w);
}

void conn_send(struct agent *a, uint32_t stream, uint8_t type, uint8_t flags, const void *payload,
               uint32_t len)
{
    int r = proto_outq_push(a->conn.outq, stream, type, flags, payload, len);
    if (r < 0)
        agent_die(a, 3, "output queue: %s (%zu bytes queued)", strerror(-r),
                  proto_outq_len(a->conn.outq));
    conn_flush(a, false);
}

void conn_send_json(struct agent *a, uint32_t stream, uint8_t type, json_t *obj)
{
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!s)
        agent_die(a, 3, "out of memory serialising a reply");
    size_t n = strlen(s);
    conn_send(a, stream, type, 0, s, (uint32_t)n);
    free(s);
}

void conn_send_error(struct agent *a, uint32_t stream, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Messages may quote request bytes (paths), and jansson wants valid UTF-8. */
    json_t *m = json_string(msg);
    if (!m) {
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
        m = json_string(msg);
    }
    conn_send_json(a, stream, PROTO_ERROR, json_pack("{s:s, s:o}", "code", code, "message", m));
}

void conn_send_window(struct agent *a, uint32_t stream, uint8_t ch, uint32_t credit)
{
    uint8_t p[4];
    proto_put_u32(p, credit);
    conn_send(a, stream, PROTO_WINDOW, ch, p, sizeof(p));
}

void conn_flush_now(struct agent *a)
{
    if (a->conn.outq)
        (void)proto_outq_flush(a->conn.outq, a->conn.out_fd);
}
