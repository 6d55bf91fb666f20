#include "tcpconn.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "chan.h"
#include "fatal.h"
#include "sockpump.h"
#include "stream.h"

struct tcp_conn {
    struct stream base;
    unsigned port;
    int fd; /* the socket while connecting; then owned by the pumps */
    struct loop_watch *cw;
    struct loop_timer *connect_t;
    bool connected;
    bool probe; /* only say whether the port accepts connections (EXIT), then close */
    /* What the daemon sent before the connection was up: at most its window. */
    uint8_t *early;
    size_t nearly;
    bool early_eof;
    uint64_t early_credit; /* WINDOW for the socket's direction before there was one */
    struct sockpump pump;  /* server <-> daemon, once connected */
};

static struct tcp_conn *to_conn(struct stream *s)
{
    return (struct tcp_conn *)s; /* base is the first member */
}

static void conn_free(struct tcp_conn *t)
{
    struct agent *a = t->base.agent;
    if (t->connect_t)
        loop_timer_cancel(a->loop, t->connect_t);
    if (t->cw)
        loop_watch_del(a->loop, t->cw);
    if (t->connected)
        sockpump_close(&t->pump);
    else if (t->fd >= 0)
        close(t->fd);
    free(t->early);
    stream_unregister(a, &t->base);
    free(t);
}

static void fail(struct tcp_conn *t, const char *why)
{
    conn_send_error(t->base.agent, t->base.id, "connect_failed",
                    "nothing accepts connections on 127.0.0.1:%u in the sandbox: %s", t->port, why);
    conn_free(t);
}

static void on_end(void *owner)
{
    conn_free(owner);
}

static void start_pumps(struct tcp_conn *t)
{
    int r = sockpump_start(&t->pump, t->base.agent, t->base.id, t->fd, on_end, t);
    if (r < 0) {
        fail(t, strerror(-r));
        return;
    }
    t->fd = -1;
    t->connected = true;
    if (t->nearly)
        (void)chan_in_data(&t->pump.in, t->early, (uint32_t)t->nearly); /* within the window */
    free(t->early);
    t->early = NULL;
    t->nearly = 0;
    if (t->early_eof)
        chan_in_eof(&t->pump.in);
    if (t->early_credit)
        chan_out_credit(&t->pump.out, (uint32_t)t->early_credit);
    t->early_credit = 0;
}

/* Connected: relay, or for a probe answer and hang up (the server sees a connection
 * that closes at once, which every server takes in its stride). */
static void on_connected(struct tcp_conn *t)
{
    if (!t->probe) {
        start_pumps(t);
        return;
    }
    conn_send_json(t->base.agent, t->base.id, PROTO_EXIT, json_pack("{s:b}", "connected", 1));
    conn_free(t);
}

static void connect_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct tcp_conn *t = data;
    loop_watch_del(l, t->cw);
    t->cw = NULL;
    loop_timer_cancel(l, t->connect_t);
    t->connect_t = NULL;
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr) {
        fail(t, strerror(soerr));
        return;
    }
    on_connected(t);
}

static void connect_timeout_cb(struct loop *l, void *data)
{
    struct tcp_conn *t = data;
    t->connect_t = NULL;
    fail(t, "timed out");
}

static void op_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len)
{
    struct tcp_conn *t = to_conn(s);
    if (ch != PROTO_CH_STDIN)
        return;
    if (t->connected) {
        if (chan_in_data(&t->pump.in, p, len) == 0)
            return;
    } else if (t->nearly + len <= PROTO_WINDOW_INIT && !t->early_eof) {
        t->early = sbx_xrealloc(t->early, t->nearly + len);
        memcpy(t->early + t->nearly, p, len);
        t->nearly += len;
        return;
    }
    conn_send_error(s->agent, s->id, "window_exceeded", "more data than the window allows");
    conn_free(t);
}

static void op_eof(struct stream *s, uint8_t ch)
{
    struct tcp_conn *t = to_conn(s);
    if (ch != PROTO_CH_STDIN)
        return;
    if (t->connected)
        chan_in_eof(&t->pump.in);
    else
        t->early_eof = true;
}

static void op_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    struct tcp_conn *t = to_conn(s);
    if (ch == PROTO_CH_STDOUT && t->connected)
        chan_out_credit(&t->pump.out, credit);
    else if (ch == PROTO_CH_STDOUT && t->early_credit + credit <= PROTO_TUNNEL_WINDOW)
        t->early_credit += credit;
}

/* SIGNAL from the daemon: its client went away, or the link expired. */
static void op_signal(struct stream *s, int sig)
{
    conn_send_json(s->agent, s->id, PROTO_EXIT, json_pack("{s:b}", "aborted", 1));
    conn_free(to_conn(s));
}

static void op_resume(struct stream *s)
{
    struct tcp_conn *t = to_conn(s);
    if (t->connected)
        chan_out_update(&t->pump.out);
}

static void op_abort(struct stream *s)
{
    conn_free(to_conn(s));
}

static const struct stream_ops tcpconn_ops = {
    .data = op_data,
    .eof = op_eof,
    .window = op_window,
    .signal = op_signal,
    .resume = op_resume,
    .abort = op_abort,
};

int tcpconn_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    json_t *port = json_object_get(req, "port");
    if (!json_is_integer(port) || json_integer_value(port) < 1 || json_integer_value(port) > 65535)
        return sbx_err_set(err, EINVAL, "bad_request", "\"port\" must be an integer 1..65535");
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sbx_err_set(err, errno, "internal", "socket: %s", strerror(errno));
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)json_integer_value(port)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
    if (r < 0 && errno != EINPROGRESS)
        return sbx_err_set(err, errno, "connect_failed",
                           "nothing accepts connections on 127.0.0.1:%u in the sandbox: %s",
                           (unsigned)json_integer_value(port), strerror(errno));
    struct tcp_conn *t = sbx_xcalloc(1, sizeof(*t));
    t->base = (struct stream){.agent = a, .id = id, .ops = &tcpconn_ops};
    t->port = (unsigned)json_integer_value(port);
    t->probe = json_is_true(json_object_get(req, "probe"));
    t->fd = TAKE_FD(fd);
    int rr = stream_register(a, &t->base);
    if (rr < 0) {
        close(t->fd);
        free(t);
        return sbx_err_set(err, -rr, "internal", "registering the stream: %s", strerror(-rr));
    }
    if (r == 0) {
        on_connected(t);
        return 0;
    }
    rr = loop_watch_add(a->loop, t->fd, EPOLLOUT, connect_cb, t, &t->cw);
    if (rr < 0)
        agent_die(a, 1, "watching a connecting socket: %s", strerror(-rr));
    t->connect_t = loop_timer_add(a->loop, TCPCONN_CONNECT_TIMEOUT_MS, connect_timeout_cb, t);
    return 0;
}
