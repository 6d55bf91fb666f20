/* The daemon's end of one sandbox's agent channel: frames over the shim's unix
 * socket, demultiplexed into streams with per-stream callbacks and flow control. */
#ifndef SBX_CHANNEL_H
#define SBX_CHANNEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../../common/loop.h"

#define CHANNEL_MAX_STREAMS 256
#define CHANNEL_OUTQ_MAX (16u * 1024u * 1024u)
/* Past HIGH queued bytes channel_congested() says so; once the queue drains below LOW,
 * every stream with on_writable hears about it. */
#define CHANNEL_OUTQ_HIGH (4u * 1024u * 1024u)
#define CHANNEL_OUTQ_LOW (1024u * 1024u)

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
    /* Optional: EOF from the agent on channel ch. */
    void (*on_eof)(struct chan_stream *st, unsigned ch, void *data);
    /* Optional: WINDOW credit from the agent for what we send on channel ch. */
    void (*on_window)(struct chan_stream *st, unsigned ch, uint32_t credit, void *data);
    /* Optional: the output queue drained after channel_congested() was true. Must not
     * end the stream. */
    void (*on_writable)(struct chan_stream *st, void *data);
};

struct channel_ops {
    /* The agent's HELLO: the sandbox is exec-ready. */
    void (*on_hello)(struct channel *c, json_t *hello, void *data);
    /* The connection is gone (shim or sandbox died, protocol error). All streams have
     * already been failed. The channel must be freed by the owner. */
    void (*on_closed)(struct channel *c, const struct sbx_err *why, void *data);
    /* Optional: the agent opened a stream (even id) with request. Accept it by filling
     * *ops and *sdata and returning 0; or fill err and return < 0, and the agent gets
     * ERROR with err's code. Without on_open every such OPEN gets ERROR unknown_op. */
    int (*on_open)(struct channel *c, struct chan_stream *st, json_t *request,
                   const struct chan_stream_ops **ops, void **sdata, void *data,
                   struct sbx_err *err);
    /* Optional: the last open stream has ended (the v1 backend stops its machine). Must
     * not free the channel. */
    void (*on_idle)(struct channel *c, void *data);
};

/* Take ownership of fd (connected, non-blocking) and send the daemon HELLO, with the
 * members of hello (borrowed, may be NULL) besides version and role. */
int channel_new(struct loop *l, int fd, const struct channel_ops *ops, void *data, json_t *hello,
                struct channel **out, struct sbx_err *err);
void channel_free(struct channel *c);

/* Open a stream with a JSON request (borrowed). */
int channel_open(struct channel *c, json_t *request, const struct chan_stream_ops *ops, void *data,
                 struct chan_stream **out, struct sbx_err *err);
/* DATA on channel ch of a stream, in frames of at most PROTO_MAX_PAYLOAD bytes. The
 * caller keeps within what the stream's op lets it send (docs/protocol.md). */
int channel_send(struct chan_stream *st, unsigned ch, const void *buf, size_t len,
                 struct sbx_err *err);
/* Send a signal to the stream's process group. */
int channel_signal(struct chan_stream *st, int signo, struct sbx_err *err);
/* Credit is returned by the owner with channel_credit (after it has really consumed the
 * bytes) instead of right after on_data. */
void channel_manual_credit(struct chan_stream *st);
int channel_credit(struct chan_stream *st, unsigned ch, uint32_t n, struct sbx_err *err);
/* EOF on channel ch of a stream. */
int channel_send_eof(struct chan_stream *st, unsigned ch, struct sbx_err *err);
/* More than CHANNEL_OUTQ_HIGH bytes wait for the shim: stop producing until on_writable. */
bool channel_congested(const struct chan_stream *st);
/* Forget a stream's callbacks: its frames are consumed and dropped from now on. */
void channel_detach(struct chan_stream *st);
uint32_t channel_stream_id(const struct chan_stream *st);
/* Streams open on the channel. */
unsigned channel_stream_count(const struct channel *c);

#endif
