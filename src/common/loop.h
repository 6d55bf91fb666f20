/* A small epoll event loop: fd watchers and one-shot timers. Single threaded;
 * callbacks may add and remove watchers and timers, including their own. */
#ifndef SBX_LOOP_H
#define SBX_LOOP_H

#include <stdint.h>

struct loop;
struct loop_watch;
struct loop_timer;

typedef void (*loop_fd_cb)(struct loop *l, int fd, uint32_t events, void *data);
typedef void (*loop_timer_cb)(struct loop *l, void *data);

int loop_new(struct loop **out);
void loop_free(struct loop *l);

/* Watch fd for events (EPOLLIN/EPOLLOUT...). Returns 0 or -errno. */
int loop_watch_add(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data,
                   struct loop_watch **out);
int loop_watch_mod(struct loop *l, struct loop_watch *w, uint32_t events);
/* Take fd's watch out of the epoll set and put it back later, its owner none the wiser
 * (loop_watch_mod meanwhile only records the events). gVisor cannot checkpoint a socket
 * that anything waits on (docs/snapshots.md). Return how many watches, or -errno. */
int loop_fd_park(struct loop *l, int fd);
int loop_fd_unpark(struct loop *l, int fd);
/* Stop watching; safe to call from inside the watcher's own callback. NULL is fine. */
void loop_watch_del(struct loop *l, struct loop_watch *w);

/* Fire cb once after ms milliseconds (0 = on the next iteration). */
struct loop_timer *loop_timer_add(struct loop *l, long long ms, loop_timer_cb cb, void *data);
/* Cancel a pending timer; NULL or an already fired timer must not be passed twice. */
void loop_timer_cancel(struct loop *l, struct loop_timer *t);

/* Run until loop_stop. Returns 0 or -errno from epoll_wait. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif
