#include "sockpump.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "../common/loop.h"
#include "../proto/proto.h"
#include "agent.h"
#include "conn.h"

static void finish_cb(struct loop *l, void *data)
{
    struct sockpump *p = data;
    p->finish_t = NULL;
    conn_send_json(p->agent, p->stream, PROTO_EXIT, json_object());
    p->on_end(p->owner);
}

/* Both directions are over: end the stream with EXIT. Deferred to the next turn because
 * the pumps that report it still use their own state afterwards. */
static void maybe_finish(struct sockpump *p)
{
    if (p->out_done && p->in_done && !p->finish_t)
        p->finish_t = loop_timer_add(p->agent->loop, 0, finish_cb, p);
}

static void on_socket_eof(void *owner)
{
    struct sockpump *p = owner;
    p->out_done = true;
    maybe_finish(p);
}

static void on_daemon_done(void *owner, int fd)
{
    struct sockpump *p = owner;
    /* The read side holds a dup of the socket, so closing this fd alone sends no FIN. */
    if (fd >= 0)
        (void)shutdown(fd, SHUT_WR);
    p->in_done = true;
    maybe_finish(p);
}

int sockpump_start(struct sockpump *p, struct agent *a, uint32_t stream, int fd,
                   void (*on_end)(void *owner), void *owner)
{
    int rfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (rfd < 0)
        return -errno;
    *p = (struct sockpump){.agent = a, .stream = stream, .on_end = on_end, .owner = owner};
    chan_in_init(&p->in, a, stream, PROTO_CH_STDIN, fd);
    p->in.on_done = on_daemon_done;
    p->in.owner = p;
    /* A socket's bytes in bulk: a larger window than a pipe's (proto.h). */
    p->in.window += PROTO_TUNNEL_WINDOW - PROTO_WINDOW_INIT;
    conn_send_window(a, stream, PROTO_CH_STDIN, PROTO_TUNNEL_WINDOW - PROTO_WINDOW_INIT);
    chan_out_init(&p->out, a, stream, PROTO_CH_STDOUT, rfd, on_socket_eof, p);
    return 0;
}

void sockpump_close(struct sockpump *p)
{
    if (p->finish_t)
        loop_timer_cancel(p->agent->loop, p->finish_t);
    p->finish_t = NULL;
    chan_out_close(&p->out, false);
    chan_in_close(&p->in);
}
