/* Streams: one per OPEN. Each kind of stream (exec today; shell sessions, PTYs,
 * the kernel and tunnels later) embeds struct stream and provides a stream_ops
 * table; main.c routes frames and child exits to it. A stream ends by sending
 * exactly one EXIT or ERROR and then calling stream_unregister and freeing itself.
 *
 * Callbacks may end (free) the stream; callers never touch it afterwards. */
#ifndef SBX_AGENT_STREAM_H
#define SBX_AGENT_STREAM_H

#include <stdint.h>
#include <sys/types.h>

struct agent;
struct stream;

struct stream_ops {
    /* DATA from the daemon on channel ch. */
    void (*data)(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len);
    /* EOF from the daemon on channel ch. */
    void (*eof)(struct stream *s, uint8_t ch);
    /* WINDOW credit for the agent's sending side of channel ch. */
    void (*window)(struct stream *s, uint8_t ch, uint32_t credit);
    /* SIGNAL with a validated signal number. */
    void (*signal)(struct stream *s, int sig);
    /* A child process this stream owns (s->pid) was reaped. */
    void (*child_exit)(struct stream *s, pid_t pid, int status);
    /* The connection's output queue drained: reading may resume. */
    void (*resume)(struct stream *s);
    /* The daemon that opened the stream is gone: kill its processes, free it, send nothing. */
    void (*abort)(struct stream *s);
    /* Streams the agent opened (even ids): the daemon ended it with ERROR. Free it and
     * send nothing. */
    void (*peer_end)(struct stream *s);
};

struct stream {
    struct agent *agent;
    uint32_t id;
    pid_t pid; /* the main child, 0 when none or already reaped */
    const struct stream_ops *ops;
};

/* Returns 0, -EEXIST (id in use) or -ENOSPC (AGENT_MAX_STREAMS reached). */
int stream_register(struct agent *a, struct stream *s);
void stream_unregister(struct agent *a, struct stream *s);
struct stream *stream_find(struct agent *a, uint32_t id);
struct stream *stream_find_pid(struct agent *a, pid_t pid);
/* Abort every stream (daemon re-HELLO, agent exit). */
void stream_abort_all(struct agent *a);
/* The output queue drained below its low-water mark: streams may read again. */
void agent_resume_streams(struct agent *a);

#endif
