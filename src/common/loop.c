#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util.h"

#define LOOP_MAX_EVENTS 64

struct loop_watch {
    int fd;
    loop_fd_cb cb;
    void *data;
    uint32_t events;
    bool dead;
    bool parked; /* out of the epoll set for now (loop_fd_park) */
    struct loop_watch *next_dead;
    struct loop_watch *prev, *next; /* all live watches, so loop_free can release them */
};

struct loop_timer {
    long long due;
    loop_timer_cb cb;
    void *data;
    struct loop_timer *next;
};

struct loop {
    int epfd;
    bool stop;
    struct loop_timer *timers; /* sorted by due */
    struct loop_watch *dead;   /* freed after the current dispatch round */
    struct loop_watch *live;
};

int loop_new(struct loop **out)
{
    int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct loop *l = sbx_xcalloc(1, sizeof(*l));
    l->epfd = fd;
    *out = l;
    return 0;
}

static void reap_dead(struct loop *l)
{
    while (l->dead) {
        struct loop_watch *w = l->dead;
        l->dead = w->next_dead;
        free(w);
    }
}

void loop_free(struct loop *l)
{
    if (!l)
        return;
    while (l->timers) {
        struct loop_timer *t = l->timers;
        l->timers = t->next;
        free(t);
    }
    while (l->live)
        loop_watch_del(l, l->live);
    reap_dead(l);
    close(l->epfd);
    free(l);
}

int loop_watch_add(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data,
                   struct loop_watch **out)
{
    struct loop_watch *w = sbx_xcalloc(1, sizeof(*w));
    w->fd = fd;
    w->cb = cb;
    w->data = data;
    w->events = events;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(w);
        return r;
    }
    w->next = l->live;
    if (w->next)
        w->next->prev = w;
    l->live = w;
    if (out)
        *out = w;
    return 0;
}

int loop_watch_mod(struct loop *l, struct loop_watch *w, uint32_t events)
{
    w->events = events;
    if (w->parked)
        return 0; /* applied by loop_fd_unpark */
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
        return -errno;
    return 0;
}

int loop_fd_park(struct loop *l, int fd)
{
    int n = 0;
    for (struct loop_watch *w = l->live; w; w = w->next) {
        if (w->fd != fd || w->parked)
            continue;
        if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
            return -errno;
        w->parked = true;
        n++;
    }
    return n;
}

int loop_fd_unpark(struct loop *l, int fd)
{
    int n = 0;
    for (struct loop_watch *w = l->live; w; w = w->next) {
        if (w->fd != fd || !w->parked)
            continue;
        struct epoll_event ev = {.events = w->events, .data.ptr = w};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            return -errno;
        w->parked = false;
        n++;
    }
    return n;
}

void loop_watch_del(struct loop *l, struct loop_watch *w)
{
    if (!w || w->dead)
        return;
    /* The fd may already be closed by the owner, in which case the kernel dropped it. */
    (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    if (w->prev)
        w->prev->next = w->next;
    else
        l->live = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->dead = true;
    w->next_dead = l->dead;
    l->dead = w;
}

struct loop_timer *loop_timer_add(struct loop *l, long long ms, loop_timer_cb cb, void *data)
{
    struct loop_timer *t = sbx_xcalloc(1, sizeof(*t));
    t->due = sbx_now_ms() + (ms > 0 ? ms : 0);
    t->cb = cb;
    t->data = data;
    struct loop_timer **p = &l->timers;
    while (*p && (*p)->due <= t->due)
        p = &(*p)->next;
    t->next = *p;
    *p = t;
    return t;
}

void loop_timer_cancel(struct loop *l, struct loop_timer *t)
{
    for (struct loop_timer **p = &l->timers; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            free(t);
            return;
        }
    }
}

void loop_stop(struct loop *l)
{
    l->stop = true;
}

static void run_timers(struct loop *l)
{
    long long now = sbx_now_ms();
    while (l->timers && l->timers->due <= now) {
        struct loop_timer *t = l->timers;
        l->timers = t->next;
        loop_timer_cb cb = t->cb;
        void *data = t->data;
        free(t);
        cb(l, data);
    }
}

int loop_run(struct loop *l)
{
    struct epoll_event evs[LOOP_MAX_EVENTS];
    l->stop = false;
    while (!l->stop) {
        int timeout = -1;
        if (l->timers) {
            long long d = l->timers->due - sbx_now_ms();
            timeout = d < 0 ? 0 : (d > 60000 ? 60000 : (int)d);
        }
        int n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (int i = 0; i < n; i++) {
            struct loop_watch *w = evs[i].data.ptr;
            if (!w->dead)
                w->cb(l, w->fd, evs[i].events, w->data);
        }
        reap_dead(l);
        run_timers(l);
    }
    return 0;
}
