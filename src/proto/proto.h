/* The daemon <-> agent wire protocol.
 *
 * One byte stream (the sandbox's stdio, relayed by the shim) carries frames:
 *
 *   u32 length   payload bytes that follow the 12-byte header (big endian)
 *   u32 stream   0 = connection control, otherwise a stream id
 *   u8  type     enum proto_type
 *   u8  flags    for DATA/EOF: the channel (PROTO_CH_*)
 *   u16 reserved must be 0
 *
 * Streams are opened by the daemon (odd ids, increasing) with OPEN and a JSON
 * request; the agent answers with DATA frames, then exactly one EXIT or ERROR,
 * after which the stream id is dead. Every DATA direction has a byte window
 * (PROTO_WINDOW_INIT at open); the receiver returns credit with WINDOW as it
 * consumes, so a slow reader stalls its writer rather than the whole channel.
 * Control payloads (HELLO, OPEN, EXIT, ERROR, SIGNAL) are JSON objects; see
 * docs/protocol.md for their fields.
 */
#ifndef SBX_PROTO_H
#define SBX_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_VERSION 1
#define PROTO_HEADER_SIZE 12
#define PROTO_MAX_PAYLOAD (256u * 1024u)
#define PROTO_WINDOW_INIT (1024u * 1024u)
/* The largest single read any end feeds its decoder: a decoder holds at most a partial
 * frame plus one such read. Large reads and writes keep the per-byte syscall count low
 * (each costs a trip through gVisor's platform inside the sandbox). */
#define PROTO_READ_MAX (256u * 1024u)
/* Streams that relay a socket (tcp_connect, egress) move bulk data: their receivers grant
 * this much in all, sending the difference over PROTO_WINDOW_INIT as WINDOW credit as
 * soon as the stream is open. Credit adds up, so a peer of an older build (a restored
 * snapshot's agent) works unchanged, only with the smaller window. */
#define PROTO_TUNNEL_WINDOW (4096u * 1024u)

enum proto_type {
    PROTO_HELLO = 1,  /* stream 0, JSON {version, ...} both ways */
    PROTO_OPEN = 2,   /* JSON request, daemon -> agent */
    PROTO_DATA = 3,   /* raw bytes on channel flags */
    PROTO_EOF = 4,    /* channel flags closed by the sender */
    PROTO_WINDOW = 5, /* payload u32 big-endian credit for channel flags */
    PROTO_EXIT = 6,   /* JSON result, agent -> daemon; ends the stream */
    PROTO_ERROR = 7,  /* JSON {code, message}; ends the stream */
    PROTO_SIGNAL = 8, /* JSON {signal}, daemon -> agent */
    PROTO_PING = 9,   /* stream 0, echoed as PONG with the same payload */
    PROTO_PONG = 10,
    /* stream 0, agent -> shim, never relayed: nothing of the user's runs, as of the
     * daemon's frames the agent has read so far (payload u64 big-endian, their count
     * since it started or was restored); see docs/protocol.md, "Quiet" */
    PROTO_IDLE = 11,
    PROTO_TYPE_MAX = 11,
};

enum proto_channel {
    PROTO_CH_STDIN = 0,
    PROTO_CH_STDOUT = 1,
    PROTO_CH_STDERR = 2,
    PROTO_CH_KERNEL = 3, /* op kernel_run: the kernel's messages, lines of JSON */
};

struct proto_frame {
    uint32_t stream;
    uint8_t type;
    uint8_t flags;
    uint32_t len;
    const uint8_t *payload; /* valid until the next decoder call */
};

/* Encode a header for a frame with len payload bytes into out[PROTO_HEADER_SIZE]. */
void proto_header_encode(uint8_t out[PROTO_HEADER_SIZE], uint32_t stream, uint8_t type,
                         uint8_t flags, uint32_t len);

/* Incremental decoder: feed any split of the byte stream, take whole frames out. */
struct proto_decoder;
struct proto_decoder *proto_decoder_new(void);
void proto_decoder_free(struct proto_decoder *d);
/* Append bytes. Returns 0, or -EMSGSIZE when more than the decoder's bound is buffered. */
int proto_decoder_feed(struct proto_decoder *d, const void *buf, size_t len);
/* Returns 1 and fills *f when a whole frame is buffered, 0 when more bytes are needed,
 * -EPROTO on a malformed header (bad type, reserved bits, oversized length). After an
 * error the stream cannot be resynchronised and the connection must be dropped. */
int proto_decoder_next(struct proto_decoder *d, struct proto_frame *f);
/* One read(2) of fd straight into the decoder (no copy through a caller's buffer): at most
 * PROTO_READ_MAX bytes, fewer when more would pass the bound. Returns the byte count, 0 at
 * EOF, -errno (-EAGAIN, -EINTR), or -EMSGSIZE when the decoder is full (drain it first). */
ssize_t proto_decoder_read(struct proto_decoder *d, int fd);
/* Bytes buffered but not yet returned as frames. */
size_t proto_decoder_pending(const struct proto_decoder *d);

/* A bounded output queue of encoded frames for a non-blocking fd. */
struct proto_outq;
struct proto_outq *proto_outq_new(size_t max_bytes);
void proto_outq_free(struct proto_outq *q);
/* Queue one frame. Returns 0 or -ENOBUFS when it would pass max_bytes. */
int proto_outq_push(struct proto_outq *q, uint32_t stream, uint8_t type, uint8_t flags,
                    const void *payload, uint32_t len);
/* Write as much as the fd takes. Returns 0 (queue may remain), or -errno on a real error. */
int proto_outq_flush(struct proto_outq *q, int fd);
size_t proto_outq_len(const struct proto_outq *q);

uint32_t proto_get_u32(const uint8_t *p);
void proto_put_u32(uint8_t *p, uint32_t v);
uint64_t proto_get_u64(const uint8_t *p);
void proto_put_u64(uint8_t *p, uint64_t v);

#endif
