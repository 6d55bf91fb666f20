#include "channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../proto/proto.h"

struct chan_stream {
    struct channel *chan;
    uint32_t id;
    const struct chan_stream_ops *ops;
    void *data;
    bool manual_credit;
    struct chan_stream *next;
};

struct channel {
    struct loop *loop;
    int fd;
    struct loop_watch *watch;
    struct proto_decoder *dec;
    struct proto_outq *out;
    const struct channel_ops *ops;
    void *data;
    uint32_t next_id;
    unsigned nstreams;
    struct chan_stream *streams;
    bool closed;
    bool congested; /* channel_congested said so: tell on_writable streams when it drains */
};

uint32_t channel_stream_id(const struct chan_stream *st)
{
    return st->id;
}

static struct chan_stream *find_stream(struct channel *c, uint32_t id)
{
    for (struct chan_stream *s = c->streams; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

static void remove_stream(struct channel *c, struct chan_stream *st)
{
    for (struct chan_stream **p = &c->streams; *p; p = &(*p)->next) {
        if (*p == st) {
            *p = st->next;
            c->nstreams--;
            free(st);
            if (c->nstreams == 0 && !c->closed && c->ops->on_idle)
                c->ops->on_idle(c, c->data);
            return;
        }
    }
}

static void update_events(struct channel *c)
{
    /* While congested, EPOLLOUT stays armed even when a direct flush emptied the queue:
     * on_io is where on_writable streams are told. */
    uint32_t ev = EPOLLIN | (proto_outq_len(c->out) || c->congested ? EPOLLOUT : 0);
    (void)loop_watch_mod(c->loop, c->watch, ev);
}

static int send_frame(struct channel *c, uint32_t stream, uint8_t type, uint8_t flags,
                      const void *buf, uint32_t len, struct sbx_err *err)
{
    int r = proto_outq_push(c->out, stream, type, flags, buf, len);
    if (r < 0)
        return sbx_err_sys(err, -r, "queueing a frame for the agent");
    r = proto_outq_flush(c->out, c->fd);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing to the agent channel");
    update_events(c);
    return 0;
}

static int send_json(struct channel *c, uint32_t stream, uint8_t type, json_t *j,
                     struct sbx_err *err)
{
    char *s = json_dumps(j, JSON_COMPACT);
    if (!s)
        return sbx_err_set(err, ENOMEM, "internal", "encoding a request");
    size_t n = strlen(s);
    int r = n > PROTO_MAX_PAYLOAD
                ? sbx_err_set(err, EMSGSIZE, "invalid_request", "request too large for the agent")
                : send_frame(c, stream, type, 0, s, (uint32_t)n, err);
    free(s);
    return r;
}

static int send_error(struct channel *c, uint32_t stream, const char *code, const char *msg,
                      struct sbx_err *err)
{
    json_t *j = json_pack("{s:s,s:s}", "code", code, "message", msg);
    int r = send_json(c, stream, PROTO_ERROR, j, err);
    json_decref(j);
    return r;
}

/* Fail every stream, then tell the owner. */
static void channel_fail(struct channel *c, const struct sbx_err *why)
{
    if (c->closed)
        return;
    c->closed = true;
    loop_watch_del(c->loop, c->watch);
    c->watch = NULL;
    while (c->streams) {
        struct chan_stream *st = c->streams;
        c->streams = st->next;
        c->nstreams--;
        if (st->ops && st->ops->on_error) {
            struct sbx_err e = *why;
            snprintf(e.code, sizeof(e.code), "channel_closed");
            st->ops->on_error(st, &e, st->data);
        }
        free(st);
    }
    c->ops->on_closed(c, why, c->data);
}

static json_t *parse_payload(const struct proto_frame *f)
{
    json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* An OPEN from the agent (docs/protocol.md, "Streams opened by the agent"). */
static int handle_open(struct channel *c, const struct proto_frame *f, struct sbx_err *err)
{
    if ((f->stream & 1) || find_stream(c, f->stream))
        return send_error(c, f->stream, "bad_stream", "agent streams use fresh even ids", err);
    if (!c->ops->on_open)
        return send_error(c, f->stream, "unknown_op", "this daemon accepts no agent streams", err);
    if (c->nstreams >= CHANNEL_MAX_STREAMS)
        return send_error(c, f->stream, "too_many_streams", "too many streams open", err);
    json_t *req = parse_payload(f);
    if (!req || !json_is_string(json_object_get(req, "op"))) {
        json_decref(req);
        return send_error(c, f->stream, "bad_request", "request has no string \"op\"", err);
    }
    struct chan_stream *st = sbx_xcalloc(1, sizeof(*st));
    st->chan = c;
    st->id = f->stream;
    st->next = c->streams;
    c->streams = st;
    c->nstreams++;
    const struct chan_stream_ops *ops = NULL;
    void *sdata = NULL;
    struct sbx_err e = {0};
    int r = c->ops->on_open(c, st, req, &ops, &sdata, c->data, &e);
    json_decref(req);
    if (r < 0) {
        remove_stream(c, st);
        return send_error(c, f->stream, e.code[0] ? e.code : "internal", e.msg, err);
    }
    st->ops = ops;
    st->data = sdata;
    return 0;
}

static int handle_frame(struct channel *c, const struct proto_frame *f, struct sbx_err *err)
{
    if (f->stream == 0) {
        if (f->type == PROTO_HELLO) {
            json_t *j = parse_payload(f);
            if (!j)
                return sbx_err_set(err, EPROTO, "internal", "agent sent a malformed HELLO");
            c->ops->on_hello(c, j, c->data);
            json_decref(j);
        } else if (f->type == PROTO_PING) {
            return send_frame(c, 0, PROTO_PONG, 0, f->payload, f->len, err);
        }
        return 0;
    }
    if (f->type == PROTO_OPEN)
        return handle_open(c, f, err);
    struct chan_stream *st = find_stream(c, f->stream);
    if (!st)
        return 0; /* a stream we already ended or detached from */
    switch (f->type) {
    case PROTO_DATA: {
        /* on_data may end the stream's owner but never the stream: it stays until EXIT. */
        bool manual = st->manual_credit && st->ops;
        if (st->ops && st->ops->on_data)
            st->ops->on_data(st, f->flags, f->payload, f->len, st->data);
        uint8_t credit[4];
        proto_put_u32(credit, f->len);
        if (f->len && !manual)
            return send_frame(c, f->stream, PROTO_WINDOW, f->flags, credit, 4, err);
        return 0;
    }
    case PROTO_EOF:
        if (st->ops && st->ops->on_eof)
            st->ops->on_eof(st, f->flags, st->data);
        return 0;
    case PROTO_WINDOW:
        if (f->len == 4 && st->ops && st->ops->on_window)
            st->ops->on_window(st, f->flags, proto_get_u32(f->payload), st->data);
        return 0;
    case PROTO_EXIT: {
        json_t *j = parse_payload(f);
        if (!j)
            j = json_object();
        if (st->ops && st->ops->on_exit)
            st->ops->on_exit(st, j, st->data);
        json_decref(j);
        remove_stream(c, st);
        return 0;
    }
    case PROTO_ERROR: {
        json_t *j = parse_payload(f);
        struct sbx_err e = {.errnum = EIO};
        const char *code = j ? json_string_value(json_object_get(j, "code")) : NULL;
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
        snprintf(e.code, sizeof(e.code), "%s", code ? code : "agent_error");
        snprintf(e.msg, sizeof(e.msg), "%s", msg ? msg : "the agent reported an error");
        json_decref(j);
        if (st->ops && st->ops->on_error)
            st->ops->on_error(st, &e, st->data);
        remove_stream(c, st);
        return 0;
    }
    default:
        return 0;
    }
}

static void on_io(struct loop *l, int fd, uint32_t events, void *data)
{
    struct channel *c = data;
    struct sbx_err err = {0};
    if (events & EPOLLOUT) {
        int r = proto_outq_flush(c->out, c->fd);
        if (r < 0) {
            sbx_err_sys(&err, -r, "writing to the agent channel");
            channel_fail(c, &err);
            return;
        }
        update_events(c);
        if (c->congested && proto_outq_len(c->out) < CHANNEL_OUTQ_LOW) {
            c->congested = false;
            for (struct chan_stream *s = c->streams; s; s = s->next)
                if (s->ops && s->ops->on_writable)
                    s->ops->on_writable(s, s->data);
        }
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    for (int rounds = 0; rounds < 16; rounds++) {
        /* Straight into the decoder, which every round drains. */
        ssize_t n = proto_decoder_read(c->dec, c->fd);
        if (n == -EINTR)
            continue;
        if (n == -EAGAIN)
            return;
        if (n < 0 && n != -EMSGSIZE) {
            sbx_err_sys(&err, (int)-n, "reading the agent channel");
            channel_fail(c, &err);
            return;
        }
        if (n == 0) {
            sbx_err_set(&err, ECONNRESET, "sandbox_not_running", "the sandbox's channel closed");
            channel_fail(c, &err);
            return;
        }
        int r = n < 0 ? (int)n : 0;
        struct proto_frame f;
        while (r == 0 && (r = proto_decoder_next(c->dec, &f)) == 1) {
            r = handle_frame(c, &f, &err);
            if (r < 0 || c->closed)
                break;
            r = 0;
        }
        if (c->closed)
            return;
        if (r < 0) {
            if (!err.msg[0])
                sbx_err_set(&err, EPROTO, "internal", "protocol error on the agent channel");
            channel_fail(c, &err);
            return;
        }
    }
}

int channel_new(struct loop *l, int fd, const struct channel_ops *ops, void *data, json_t *extra,
                struct channel **out, struct sbx_err *err)
{
    struct channel *c = sbx_xcalloc(1, sizeof(*c));
    c->loop = l;
    c->fd = fd;
    c->ops = ops;
    c->data = data;
    c->next_id = 1;
    c->dec = proto_decoder_new();
    c->out = proto_outq_new(CHANNEL_OUTQ_MAX);
    int r = loop_watch_add(l, fd, EPOLLIN, on_io, c, &c->watch);
    if (r < 0) {
        c->fd = -1;
        channel_free(c);
        return sbx_err_sys(err, -r, "watching the agent channel");
    }
    json_t *hello = json_pack("{s:i,s:s}", "version", PROTO_VERSION, "role", "daemon");
    if (extra)
        json_object_update_missing(hello, extra);
    r = send_json(c, 0, PROTO_HELLO, hello, err);
    json_decref(hello);
    if (r < 0) {
        c->fd = -1;
        channel_free(c);
        return r;
    }
    *out = c;
    return 0;
}

void channel_free(struct channel *c)
{
    if (!c)
        return;
    if (!c->closed) {
        struct sbx_err e = {.errnum = ECANCELED, .code = "sandbox_not_running"};
        snprintf(e.msg, sizeof(e.msg), "the sandbox was stopped");
        /* Fail streams without re-entering the owner: it is freeing us. */
        c->closed = true;
        loop_watch_del(c->loop, c->watch);
        while (c->streams) {
            struct chan_stream *st = c->streams;
            c->streams = st->next;
            if (st->ops && st->ops->on_error)
                st->ops->on_error(st, &e, st->data);
            free(st);
        }
    }
    if (c->fd >= 0)
        close(c->fd);
    proto_decoder_free(c->dec);
    proto_outq_free(c->out);
    free(c);
}

int channel_open(struct channel *c, json_t *request, const struct chan_stream_ops *ops, void *data,
                 struct chan_stream **out, struct sbx_err *err)
{
    if (c->closed)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "the sandbox is not running");
    if (c->nstreams >= CHANNEL_MAX_STREAMS)
        return sbx_err_set(err, EBUSY, "sandbox_busy", "too many streams open in this sandbox");
    struct chan_stream *st = sbx_xcalloc(1, sizeof(*st));
    st->chan = c;
    st->id = c->next_id;
    c->next_id += 2;
    st->ops = ops;
    st->data = data;
    int r = send_json(c, st->id, PROTO_OPEN, request, err);
    if (r < 0) {
        free(st);
        return r;
    }
    st->next = c->streams;
    c->streams = st;
    c->nstreams++;
    *out = st;
    return 0;
}

int channel_send(struct chan_stream *st, unsigned ch, const void *buf, size_t len,
                 struct sbx_err *err)
{
    if (st->chan->closed)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "the sandbox is not running");
    const uint8_t *p = buf;
    while (len) {
        uint32_t n = len > PROTO_MAX_PAYLOAD ? PROTO_MAX_PAYLOAD : (uint32_t)len;
        int r = send_frame(st->chan, st->id, PROTO_DATA, (uint8_t)ch, p, n, err);
        if (r < 0)
            return r;
        p += n;
        len -= n;
    }
    return 0;
}

int channel_signal(struct chan_stream *st, int signo, struct sbx_err *err)
{
    json_t *j = json_pack("{s:i}", "signal", signo);
    int r = send_json(st->chan, st->id, PROTO_SIGNAL, j, err);
    json_decref(j);
    return r;
}

void channel_manual_credit(struct chan_stream *st)
{
    st->manual_credit = true;
}

int channel_credit(struct chan_stream *st, unsigned ch, uint32_t n, struct sbx_err *err)
{
    if (st->chan->closed)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "the sandbox is not running");
    uint8_t credit[4];
    proto_put_u32(credit, n);
    return send_frame(st->chan, st->id, PROTO_WINDOW, (uint8_t)ch, credit, 4, err);
}

int channel_send_eof(struct chan_stream *st, unsigned ch, struct sbx_err *err)
{
    if (st->chan->closed)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "the sandbox is not running");
    return send_frame(st->chan, st->id, PROTO_EOF, (uint8_t)ch, NULL, 0, err);
}

bool channel_congested(const struct chan_stream *st)
{
    struct channel *c = st->chan;
    if (proto_outq_len(c->out) <= CHANNEL_OUTQ_HIGH)
        return false;
    c->congested = true;
    return true;
}

void channel_detach(struct chan_stream *st)
{
    st->ops = NULL;
    st->data = NULL;
}

unsigned channel_stream_count(const struct channel *c)
{
    return c->nstreams;
}
