/* The agent's end of the daemon channel: frames in on one fd, frames out on
 * another, both non-blocking, driven by the event loop.
 *
 * Back-pressure: when the output queue passes CONN_OUTQ_HIGH the connection is
 * "paused": pipes stop being read and no further input frames are handled until
 * the daemon has drained it below CONN_OUTQ_LOW. Every frame handled can add at
 * most one reply, every read at most AGENT_READ_CHUNK bytes, and every stream at
 * most a few small frames at its end, so the queue stays below CONN_OUTQ_MAX. */
#ifndef SBX_AGENT_CONN_H
#define SBX_AGENT_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/loop.h"
#include "../proto/proto.h"

#define CONN_OUTQ_HIGH (1024u * 1024u)
#define CONN_OUTQ_LOW (256u * 1024u)
#define CONN_OUTQ_MAX (16u * 1024u * 1024u)

struct agent;

/* Handles one decoded frame from the daemon. */
typedef void (*conn_frame_fn)(struct agent *a, const struct proto_frame *f);

struct conn {
    int in_fd, out_fd;
    conn_frame_fn on_frame;
    struct proto_decoder *dec;
    struct proto_outq *outq;
    struct loop_watch *in_w, *out_w;
    bool paused;
};

int conn_init(struct agent *a, int in_fd, int out_fd, conn_frame_fn on_frame);
/* Queue a frame and try to write it. A full queue or a dead fd is fatal (agent_die). */
void conn_send(struct agent *a, uint32_t stream, uint8_t type, uint8_t flags, const void *payload,
               uint32_t len);
/* Serialise obj (reference stolen) and send it. */
void conn_send_json(struct agent *a, uint32_t stream, uint8_t type, json_t *obj);
/* ERROR {"code":code,"message":...}; ends the stream on the daemon's side. */
void conn_send_error(struct agent *a, uint32_t stream, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void conn_send_window(struct agent *a, uint32_t stream, uint8_t ch, uint32_t credit);
/* True while the output queue is above its high-water mark. */
bool conn_paused(const struct agent *a);
/* Best effort: write what the fd takes right now (used just before exiting). */
void conn_flush_now(struct agent *a);

#endif
