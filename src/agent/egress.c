#include "egress.h"

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
#include "fatal.h"
#include "chan.h"
#include "env.h"
#include "sockpump.h"
#include "stream.h"

struct egress_listener {
    int fd;
    struct loop_watch *w;
    unsigned nconns;
    uint32_t next_id; /* even */
};

/* One client connection. */
struct egress_conn {
    struct stream base;
    struct sockpump pump; /* client <-> daemon */
};

static void listener_update(struct agent *a);

static void conn_free(struct egress_conn *e)
{
    struct agent *a = e->base.agent;
    sockpump_close(&e->pump);
    stream_unregister(a, &e->base);
    free(e);
    a->egress->nconns--;
    listener_update(a);
}

static void on_end(void *owner)
{
    conn_free(owner);
}

static struct egress_conn *to_conn(struct stream *s)
{
    return (struct egress_conn *)s; /* base is the first member */
}

static void op_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len)
{
    struct egress_conn *e = to_conn(s);
    if (ch != PROTO_CH_STDIN)
        return;
    if (chan_in_data(&e->pump.in, p, len) < 0) {
        conn_send_error(s->agent, s->id, "window_exceeded", "more data than the window allows");
        conn_free(e);
    }
}

static void op_eof(struct stream *s, uint8_t ch)
{
    if (ch == PROTO_CH_STDIN)
        chan_in_eof(&to_conn(s)->pump.in);
}

static void op_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    if (ch == PROTO_CH_STDOUT)
        chan_out_credit(&to_conn(s)->pump.out, credit);
}

/* SIGNAL from the daemon: it gave up on the connection (a timeout, a policy change). */
static void op_signal(struct stream *s, int sig)
{
    conn_send_json(s->agent, s->id, PROTO_EXIT, json_pack("{s:b}", "aborted", 1));
    conn_free(to_conn(s));
}

static void op_resume(struct stream *s)
{
    chan_out_update(&to_conn(s)->pump.out);
}

static void op_abort(struct stream *s)
{
    conn_free(to_conn(s));
}

static const struct stream_ops egress_ops = {
    .data = op_data,
    .eof = op_eof,
    .window = op_window,
    .signal = op_signal,
    .resume = op_resume,
    .abort = op_abort,
    .peer_end = op_abort,
};

static uint32_t next_stream_id(struct agent *a)
{
    struct egress_listener *l = a->egress;
    for (;;) {
        uint32_t id = l->next_id;
        l->next_id = id >= 0x7ffffffeu ? 2 : id + 2;
        if (!stream_find(a, id))
            return id;
    }
}

static void on_accept(struct loop *lp, int fd, uint32_t events, void *data)
{
    struct agent *a = data;
    struct egress_listener *l = a->egress;
    while (l->nconns < EGRESS_MAX_CONNS && a->nstreams < AGENT_MAX_STREAMS) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            break; /* EAGAIN, or a connection that died in the backlog */
        struct egress_conn *e = sbx_xcalloc(1, sizeof(*e));
        e->base = (struct stream){.agent = a, .id = next_stream_id(a), .ops = &egress_ops};
        if (sockpump_start(&e->pump, a, e->base.id, cfd, on_end, e) < 0) {
            close(cfd);
            free(e);
            break;
        }
        /* The pump only reads in a later turn of the loop, so OPEN still goes first. */
        if (stream_register(a, &e->base) < 0) {
            sockpump_close(&e->pump);
            free(e);
            break;
        }
        l->nconns++;
        conn_send_json(a, e->base.id, PROTO_OPEN, json_pack("{s:s}", "op", "egress"));
    }
    listener_update(a);
}

/* Accept only while there is room for another connection. */
static void listener_update(struct agent *a)
{
    struct egress_listener *l = a->egress;
    bool want = l->nconns < EGRESS_MAX_CONNS && a->nstreams < AGENT_MAX_STREAMS;
    if (want && !l->w) {
        int r = loop_watch_add(a->loop, l->fd, EPOLLIN, on_accept, a, &l->w);
        if (r < 0)
            agent_die(a, 1, "watching the egress listener: %s", strerror(-r));
    } else if (!want && l->w) {
        loop_watch_del(a->loop, l->w);
        l->w = NULL;
    }
}

int egress_listen(struct agent *a)
{
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons(EGRESS_PORT),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 128) < 0)
        return -errno;
    struct egress_listener *l = sbx_xcalloc(1, sizeof(*l));
    l->fd = TAKE_FD(fd);
    l->next_id = 2;
    a->egress = l;
    listener_update(a);
    /* Upper and lower case: curl reads only http_proxy in lower case, others either. */
    env_base_add("HTTPS_PROXY=" EGRESS_PROXY_URL);
    env_base_add("https_proxy=" EGRESS_PROXY_URL);
    env_base_add("HTTP_PROXY=" EGRESS_PROXY_URL);
    env_base_add("http_proxy=" EGRESS_PROXY_URL);
    env_base_add("NO_PROXY=localhost,127.0.0.1,::1");
    env_base_add("no_proxy=localhost,127.0.0.1,::1");
    return 0;
}
