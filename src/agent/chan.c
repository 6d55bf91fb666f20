#include "chan.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "fatal.h"

/* ---- chan_out ---- */

static void chan_out_cb(struct loop *l, int fd, uint32_t events, void *data);

void chan_out_init(struct chan_out *c, struct agent *a, uint32_t stream, uint8_t ch, int fd,
                   void (*on_close)(void *owner), void *owner)
{
    *c = (struct chan_out){.agent = a,
                           .stream = stream,
                           .ch = ch,
                           .fd = fd,
                           .window = PROTO_WINDOW_INIT,
                           .last_active_ms = sbx_now_ms(),
                           .on_close = on_close,
                           .owner = owner};
    chan_out_update(c);
}

bool chan_out_open(const struct chan_out *c)
{
    return c->fd >= 0;
}

bool chan_out_blocked(const struct chan_out *c)
{
    return c->window == 0 || conn_paused(c->agent);
}

void chan_out_update(struct chan_out *c)
{
    bool want = c->fd >= 0 && !chan_out_blocked(c);
    if (want && !c->w) {
        /* A watch is only ever registered while we intend to read: with the
         * events mask merely cleared, epoll would still report EPOLLHUP. */
        int r = loop_watch_add(c->agent->loop, c->fd, EPOLLIN, chan_out_cb, c, &c->w);
        if (r < 0)
            agent_die(c->agent, 1, "watching a pipe: %s", strerror(-r));
        c->last_active_ms = sbx_now_ms();
    } else if (!want && c->w) {
        loop_watch_del(c->agent->loop, c->w);
        c->w = NULL;
    }
}

void chan_out_credit(struct chan_out *c, uint32_t credit)
{
    c->window += credit;
    /* A peer can't make us buffer with credit (we only read what we send), but keep it sane. */
    if (c->window > (uint64_t)1 << 40)
        c->window = (uint64_t)1 << 40;
    chan_out_update(c);
}

void chan_out_close(struct chan_out *c, bool send_eof)
{
    if (c->fd < 0)
        return;
    loop_watch_del(c->agent->loop, c->w);
    c->w = NULL;
    close(c->fd);
    c->fd = -1;
    if (send_eof)
        conn_send(c->agent, c->stream, PROTO_EOF, c->ch, NULL, 0);
}

static void chan_out_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct chan_out *c = data;
    struct agent *a = c->agent;
    if (chan_out_blocked(c)) {
        chan_out_update(c);
        return;
    }
    size_t want = sizeof(a->iobuf);
    if (c->window < want)
        want = (size_t)c->window;
    ssize_t n = read(c->fd, a->iobuf, want);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        /* EOF, or a read error that we treat as one. */
        chan_out_close(c, true);
        if (c->on_close)
            c->on_close(c->owner); /* may free c */
        return;
    }
    c->window -= (uint64_t)n;
    c->last_active_ms = sbx_now_ms();
    conn_send(a, c->stream, PROTO_DATA, c->ch, a->iobuf, (uint32_t)n);
    chan_out_update(c);
}

/* ---- chan_in ---- */

static void chan_in_cb(struct loop *l, int fd, uint32_t events, void *data);

void chan_in_init(struct chan_in *c, struct agent *a, uint32_t stream, uint8_t ch, int fd)
{
    *c = (struct chan_in){
        .agent = a, .stream = stream, .ch = ch, .fd = fd, .window = PROTO_WINDOW_INIT};
}

void chan_in_close(struct chan_in *c)
{
    if (c->fd >= 0) {
        loop_watch_del(c->agent->loop, c->w);
        c->w = NULL;
        close(c->fd);
        c->fd = -1;
    }
    free(c->buf);
    c->buf = NULL;
    c->off = c->len = 0;
}

/* Return credit for n consumed (written or discarded) bytes. */
static void chan_in_consumed(struct chan_in *c, size_t n)
{
    if (n == 0)
        return;
    c->window += n;
    conn_send_window(c->agent, c->stream, c->ch, (uint32_t)n);
}

/* The reader went away: what is buffered can never be delivered. */
static void chan_in_broken(struct chan_in *c)
{
    size_t dropped = c->len - c->off;
    chan_in_close(c);
    chan_in_consumed(c, dropped);
}

static void chan_in_finish(struct chan_in *c)
{
    if (c->done)
        return;
    c->done = true;
    if (c->on_done)
        c->on_done(c->owner, c->fd);
}

static void chan_in_pump(struct chan_in *c)
{
    while (c->fd >= 0 && c->off < c->len) {
        ssize_t n = write(c->fd, c->buf + c->off, c->len - c->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            chan_in_broken(c);
            return;
        }
        c->off += (size_t)n;
        chan_in_consumed(c, (size_t)n);
    }
    if (c->fd < 0)
        return;
    if (c->off == c->len) {
        c->off = c->len = 0;
        if (c->eof) {
            chan_in_finish(c);
            chan_in_close(c);
            return;
        }
    }
    bool want = c->off < c->len;
    if (want && !c->w) {
        int r = loop_watch_add(c->agent->loop, c->fd, EPOLLOUT, chan_in_cb, c, &c->w);
        if (r < 0)
            agent_die(c->agent, 1, "watching a pipe: %s", strerror(-r));
    } else if (!want && c->w) {
        loop_watch_del(c->agent->loop, c->w);
        c->w = NULL;
    }
}

static void chan_in_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    chan_in_pump(data);
}

int chan_in_data(struct chan_in *c, const uint8_t *p, uint32_t len)
{
    if (len > c->window)
        return -EOVERFLOW;
    c->window -= len;
    if (c->fd < 0 || c->eof) {
        /* Nobody will read it: drop it but keep the daemon's window open. */
        chan_in_consumed(c, len);
        return 0;
    }
    if (c->off > 0 && c->off == c->len)
        c->off = c->len = 0;
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    /* Bounded: len + buffered never exceeds the window we granted. */
    c->buf = sbx_xrealloc(c->buf, c->len + len);
    memcpy(c->buf + c->len, p, len);
    c->len += len;
    chan_in_pump(c);
    return 0;
}

void chan_in_eof(struct chan_in *c)
{
    c->eof = true;
    if (c->off == c->len) {
        chan_in_finish(c);
        chan_in_close(c);
    }
}
