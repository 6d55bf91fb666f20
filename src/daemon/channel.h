/* The daemon's end of one sandbox's agent channel: frames over the shim's unix
 * socket, demultiplexed into streams with per-stream callbacks and flow control. */
#ifndef SBX_CHANNEL_H
#define SBX_CHANNEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/loop.h"

#define CHANNEL_MAX_STREAMS 256
#define CHANNEL_OUTQ_MAX (16u * 1024u * 1024u)

struct channel;
struct chan_stream;

struct chan_stream_ops {
    /* Bytes on PROTO_CH_STDOUT / PROTO_CH_STDERR. Credit is returned after the call. */
    void (*on_data)(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len,
                    void *data);
    /* Exactly one of on_exit / on_error ends the stream; after it the stream is freed.
     * on_error also runs when the channel itself goes away (code "channel_closed"). */
    void (*on_exit)(struct chan_stream *st, json_t *result, void *data);
    void (*on_error)(struct chan_stream *st, const struct sbx_err *err, void *data);
};

struct channel_ops {
    /* The agent's HELLO: the sandbox is exec-ready. */
    void (*on_hello)(struct channel *c, json_t *hello, void *data);
    /* The connection is gone (shim or sandbox died, protocol error). All streams have
     * already been failed. The channel must be freed by the owner. */
    void (*on_closed)(struct channel *c, const struct sbx_err *why, void *data);
};

/* Take ownership of fd (connected, non-blocking) and send the daemon HELLO. */
int channel_new(struct loop *l, int fd, const struct channel_ops *ops, void *data,
                struct channel **out, struct sbx_err *err);
void channel_free(struct channel *c);

/* Open a stream with a JSON request (borrowed). */
int channel_open(struct channel *c, json_t *request, const struct chan_stream_ops *ops,
                 void *data, struct chan_stream **out, struct sbx_err *err);
/* DATA on channel ch of a stream, in frames of at most PROTO_MAX_PAYLOAD bytes. The
 * caller keeps within what the stream's op lets it send (docs/protocol.md). */
int channel_send(struct chan_stream *st, unsigned ch, const void *buf, size_t len,
                 struct sbx_err *err);
/* Send a signal to the stream's process group. */
int channel_signal(struct chan_stream *st, int signo, struct sbx_err *err);
/* Forget a stream's callbacks: its frames are consumed and dropped from now on. */
void channel_detach(struct chan_stream *st);
uint32_t channel_stream_id(const struct chan_stream *st);

#endif
