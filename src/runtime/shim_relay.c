/* Import circle with shim.c (allowed inside a folder, docs/architecture.md#layering): the
 * shim's main loop (shim.c) drives the frame relay (shim_relay.c), which reports through
 * the shim's log and its ready line (shim_log, ready_say). Both are sbx-shim's; nothing
 * outside sees the loop. */
/* The frame relay of sbx-shim (shim.h): frames from the one client (sbxd) go to the agent's
 * stdin, frames from its stdout to the client, each way through a bounded queue; a slow
 * side stalls the other instead of growing a queue. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "shim.h"

static bool room(const struct proto_outq *q)
{
    return proto_outq_len(q) + SHIM_MAX_FRAME <= SHIM_OUTQ_MAX;
}

/* ---- epoll interest, recomputed from state ---- */

static void update_interest(struct shim *s)
{
    if (s->client_w) {
        uint32_t ev = 0;
        if (!s->client_stalled)
            ev |= EPOLLIN;
        if (proto_outq_len(s->to_client) > 0)
            ev |= EPOLLOUT;
        (void)loop_watch_mod(s->loop, s->client_w, ev);
    }
    if (s->agent_out_w)
        (void)loop_watch_mod(s->loop, s->agent_out_w, s->agent_stalled ? 0 : EPOLLIN);
    if (s->agent_in_w)
        (void)loop_watch_mod(s->loop, s->agent_in_w,
                             proto_outq_len(s->to_agent) > 0 ? EPOLLOUT : 0);
}

void shim_relay_drop_client(struct shim *s, const char *why)
{
    if (s->client_fd < 0)
        return;
    shim_log(s,
             "client %llu detached: %s (%zu bytes of a partial frame dropped, %zu queued "
             "for it dropped)",
             s->client_seq, why, proto_decoder_pending(s->client_dec),
             proto_outq_len(s->to_client));
    loop_watch_del(s->loop, s->client_w);
    s->client_w = NULL;
    close(s->client_fd);
    s->client_fd = -1;
    s->drop_said = false;
    proto_decoder_free(s->client_dec);
    s->client_dec = NULL;
    proto_outq_free(s->to_client);
    s->to_client = NULL;
    s->client_stalled = false;
}

static void close_agent_in(struct shim *s, const char *why)
{
    if (s->agent_in < 0)
        return;
    shim_log(s, "agent stdin closed: %s (%zu bytes unsent)", why, proto_outq_len(s->to_agent));
    loop_watch_del(s->loop, s->agent_in_w);
    s->agent_in_w = NULL;
    close(s->agent_in);
    s->agent_in = -1;
}

static void close_agent_out(struct shim *s, const char *why)
{
    if (s->agent_out < 0)
        return;
    shim_log(s, "agent stdout closed: %s", why);
    loop_watch_del(s->loop, s->agent_out_w);
    s->agent_out_w = NULL;
    close(s->agent_out);
    s->agent_out = -1;
    s->agent_stalled = false;
}

static void flush_to_agent(struct shim *s)
{
    if (s->agent_in < 0) {
        /* Nobody to deliver to: keep the queue empty so clients never stall. */
        proto_outq_free(s->to_agent);
        s->to_agent = proto_outq_new(SHIM_OUTQ_MAX);
        return;
    }
    int r = proto_outq_flush(s->to_agent, s->agent_in);
    if (r < 0) {
        close_agent_in(s, strerror(-r));
        flush_to_agent(s);
    }
}

static void flush_to_client(struct shim *s)
{
    if (s->client_fd < 0)
        return;
    int r = proto_outq_flush(s->to_client, s->client_fd);
    if (r < 0)
        shim_relay_drop_client(s, strerror(-r));
}

/* ---- the sentry's timer slack (shim_idle.h) ---- */

/* The runsc sandbox process whose slack changes: none under a native container. */
static pid_t sentry(const struct shim *s)
{
    return s->native ? 0 : s->run_pid;
}

static void log_slack(struct shim *s, const char *what, int r)
{
    if (r < 0)
        shim_log(s, "timer slack %s: %s", what, strerror(-r));
}

static void queue_for_agent(struct shim *s, uint32_t stream, uint8_t type, uint8_t flags,
                            const uint8_t *payload, uint32_t len)
{
    log_slack(s, "restored", shim_idle_frame_to_agent(&s->idle, sentry(s), type));
    (void)proto_outq_push(s->to_agent, stream, type, flags, payload, len);
}

/* ---- the two directions ---- */

static void pump_client_to_agent(struct shim *s)
{
    if (s->client_fd < 0)
        return;
    s->client_stalled = false;
    for (;;) {
        if (!room(s->to_agent)) {
            s->client_stalled = true;
            break;
        }
        struct proto_frame f;
        int r = proto_decoder_next(s->client_dec, &f);
        if (r == 0)
            break;
        if (r < 0) {
            shim_relay_drop_client(s, "malformed frame from client");
            break;
        }
        queue_for_agent(s, f.stream, f.type, f.flags, f.payload, f.len);
        s->frames_down++;
    }
    flush_to_agent(s);
}

static void pump_agent_to_client(struct shim *s)
{
    s->agent_stalled = false;
    if (s->agent_broken)
        return;
    for (;;) {
        if (s->client_fd >= 0 && !room(s->to_client)) {
            s->agent_stalled = true; /* the client is slow: let the agent block on write */
            break;
        }
        struct proto_frame f;
        int r = proto_decoder_next(s->agent_dec, &f);
        if (r == 0)
            break;
        if (r < 0) {
            shim_log(s, "malformed frame from the agent; discarding its output from now on");
            s->agent_broken = true;
            shim_relay_drop_client(s, "agent stream corrupt");
            break;
        }
        if (s->ready_fd >= 0) {
            long long ms = sbx_now_ms() - s->t_spawn;
            shim_log(s, "first frame from the agent (type %u) %lld ms after spawning runsc", f.type,
                     ms);
            ready_say(s, "ready %lld", ms);
        }
        if (f.stream == 0 && f.type == PROTO_IDLE) {
            /* the shim's own: never relayed */
            log_slack(s, "stretched", shim_idle_said(&s->idle, sentry(s), &f));
            continue;
        }
        if (s->client_fd >= 0) {
            (void)proto_outq_push(s->to_client, f.stream, f.type, f.flags, f.payload, f.len);
            s->frames_up++;
        } else {
            s->frames_dropped++;
            /* Once per detached spell: a test (and an operator) can see that the agent's
             * output went nowhere, rather than guess it from time. */
            if (!s->drop_said)
                shim_log(s, "no client: dropping the agent's frames until one attaches");
            s->drop_said = true;
        }
    }
    flush_to_client(s);
}

static void on_agent_out(struct loop *l, int fd, uint32_t events, void *data)
{
    struct shim *s = data;
    static uint8_t discard[SHIM_READ_CHUNK]; /* single threaded */
    ssize_t n =
        s->agent_broken ? read(fd, discard, sizeof(discard)) : proto_decoder_read(s->agent_dec, fd);
    if (n < 0 && s->agent_broken)
        n = -errno;
    if (n == -EINTR || n == -EAGAIN)
        return;
    if (n < 0 && n != -EMSGSIZE) {
        close_agent_out(s, strerror((int)-n));
        return;
    }
    if (n == 0) {
        close_agent_out(s, "EOF");
        return;
    }
    if (s->agent_broken)
        return;
    if (n == -EMSGSIZE) {
        shim_log(s, "agent decoder overflow; discarding its output from now on");
        s->agent_broken = true;
        shim_relay_drop_client(s, "agent stream corrupt");
        return;
    }
    pump_agent_to_client(s);
    update_interest(s);
}

static void on_agent_in(struct loop *l, int fd, uint32_t events, void *data)
{
    struct shim *s = data;
    if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLOUT)) {
        close_agent_in(s, "the agent side closed");
        flush_to_agent(s);
    } else {
        flush_to_agent(s);
    }
    pump_client_to_agent(s); /* room may have appeared */
    update_interest(s);
}

static void on_client(struct loop *l, int fd, uint32_t events, void *data)
{
    struct shim *s = data;
    if (events & EPOLLOUT) {
        flush_to_client(s);
        if (s->client_fd >= 0 && s->agent_stalled)
            pump_agent_to_client(s);
    }
    if (s->client_fd >= 0 && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        ssize_t n = proto_decoder_read(s->client_dec, s->client_fd);
        if (n == -EMSGSIZE)
            shim_relay_drop_client(s, "client decoder overflow");
        else if (n < 0 && n != -EINTR && n != -EAGAIN)
            shim_relay_drop_client(s, strerror((int)-n));
        else if (n == 0)
            shim_relay_drop_client(s, "EOF");
        else if (n > 0)
            pump_client_to_agent(s);
    }
    if (s->client_fd < 0 && s->agent_stalled)
        pump_agent_to_client(s); /* nobody to wait for any more: discard */
    update_interest(s);
}

void shim_relay_accept(struct loop *l, int fd, uint32_t events, void *data)
{
    struct shim *s = data;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            shim_log(s, "accept: %s", strerror(errno));
        return;
    }
    if (s->agent_broken) {
        shim_log(s, "refusing client: the agent's stream is corrupt");
        close(c);
        return;
    }
    if (s->client_fd >= 0)
        shim_relay_drop_client(s, "replaced by a new client");
    s->client_fd = c;
    s->client_seq++;
    s->client_dec = proto_decoder_new();
    s->to_client = proto_outq_new(SHIM_OUTQ_MAX);
    int r = loop_watch_add(s->loop, c, EPOLLIN, on_client, s, &s->client_w);
    if (r < 0) {
        shim_log(s, "watching client: %s", strerror(-r));
        close(c);
        s->client_fd = -1;
        proto_decoder_free(s->client_dec);
        s->client_dec = NULL;
        proto_outq_free(s->to_client);
        s->to_client = NULL;
        return;
    }
    shim_log(s, "client %llu attached", s->client_seq);
    if (s->agent_stalled)
        pump_agent_to_client(s);
    update_interest(s);
}

int shim_relay_agent(struct shim *s)
{
    (void)sbx_set_nonblock(s->agent_in);
    (void)sbx_set_nonblock(s->agent_out);
    int r = loop_watch_add(s->loop, s->agent_out, EPOLLIN, on_agent_out, s, &s->agent_out_w);
    if (r == 0)
        r = loop_watch_add(s->loop, s->agent_in, 0, on_agent_in, s, &s->agent_in_w);
    return r;
}

void shim_relay_hello(struct shim *s)
{
    /* Queued now, read by the agent once it runs again. */
    char hello[96];
    int n =
        snprintf(hello, sizeof(hello), "{\"version\":%d,\"role\":\"daemon\",\"restored\":true%s}",
                 PROTO_VERSION, s->forked ? ",\"forked\":true" : "");
    queue_for_agent(s, 0, PROTO_HELLO, 0, (const uint8_t *)hello, (size_t)n);
    flush_to_agent(s);
    update_interest(s);
}

void shim_relay_drain(struct shim *s)
{
    /* Drain what the agent wrote last, give the client a moment to take it. */
    while (s->agent_out >= 0 && !s->agent_stalled) {
        if (s->agent_broken || proto_decoder_read(s->agent_dec, s->agent_out) <= 0)
            break;
        pump_agent_to_client(s);
    }
    for (int i = 0; i < 20 && s->client_fd >= 0 && proto_outq_len(s->to_client) > 0; i++) {
        flush_to_client(s);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
