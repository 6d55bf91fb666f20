/* Byte pumps between a local fd and one channel of a stream, with the
 * protocol's per-channel flow control. Reusable by every stream kind that moves
 * bytes (exec pipes now; PTYs, shells and tunnels later).
 *
 * chan_out: fd -> DATA frames. Reads at most the remaining window (and at most
 *   AGENT_READ_CHUNK) and stops watching the fd while the window is closed or the
 *   connection is paused, so the writer blocks instead of the agent buffering.
 *   On EOF it sends an EOF frame, closes the fd and calls on_close.
 * chan_in: DATA frames -> fd. Buffers at most the window it granted
 *   (PROTO_WINDOW_INIT), writes as the fd takes it and returns WINDOW credit for
 *   what was written. After the daemon's EOF and a drained buffer it closes the fd. */
#ifndef SBX_AGENT_CHAN_H
#define SBX_AGENT_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent;
struct loop_watch;

struct chan_out {
    struct agent *agent;
    uint32_t stream;
    uint8_t ch;
    int fd; /* -1 once closed */
    struct loop_watch *w;
    uint64_t window;          /* bytes we may still send */
    long long last_active_ms; /* last read, or last time reading became possible */
    void (*on_close)(void *owner);
    void *owner;
};

void chan_out_init(struct chan_out *c, struct agent *a, uint32_t stream, uint8_t ch, int fd,
                   void (*on_close)(void *owner), void *owner);
/* Start or stop watching to match the window and the connection. */
void chan_out_update(struct chan_out *c);
void chan_out_credit(struct chan_out *c, uint32_t credit);
/* True when reading is held back by flow control (window or connection). */
bool chan_out_blocked(const struct chan_out *c);
bool chan_out_open(const struct chan_out *c);
/* Close now; send_eof sends the EOF frame. on_close is not called. */
void chan_out_close(struct chan_out *c, bool send_eof);

struct chan_in {
    struct agent *agent;
    uint32_t stream;
    uint8_t ch;
    int fd; /* -1 once closed */
    struct loop_watch *w;
    uint8_t *buf;
    size_t off, len;
    uint64_t window; /* bytes the daemon may still send */
    bool eof;        /* the daemon sent EOF */
    bool done;       /* on_done ran */
    /* Optional: the daemon's EOF arrived and every byte before it was written (fd still
     * open, about to be closed) or dropped (fd already closed). Runs once. */
    void (*on_done)(void *owner, int fd);
    void *owner;
};

void chan_in_init(struct chan_in *c, struct agent *a, uint32_t stream, uint8_t ch, int fd);
/* Returns 0, or -EOVERFLOW when the daemon sent more than its window. */
int chan_in_data(struct chan_in *c, const uint8_t *p, uint32_t len);
void chan_in_eof(struct chan_in *c);
/* Close the fd and drop buffered bytes; sends nothing. */
void chan_in_close(struct chan_in *c);

#endif
