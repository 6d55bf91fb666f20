/* A connected socket pumped both ways through one stream: socket -> daemon on channel 1
 * (chan_out), daemon -> socket on channel 0 (chan_in). The socket is read through a dup
 * (chan_out closes its fd at EOF) and written through the original, so each direction
 * half-closes on its own: the peer's EOF and the daemon's EOF are both half-closes.
 * Once both directions are over the stream ends with EXIT and on_end frees the owner. */
#ifndef SBX_AGENT_SOCKPUMP_H
#define SBX_AGENT_SOCKPUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "chan.h"

struct agent;
struct loop_timer;

struct sockpump {
    struct agent *agent;
    uint32_t stream;
    struct chan_out out; /* socket -> daemon, channel 1 */
    struct chan_in in;   /* daemon -> socket, channel 0 */
    bool out_done, in_done;
    struct loop_timer *finish_t;
    void (*on_end)(void *owner);
    void *owner;
};

/* Start pumping fd for the stream. On success the pump owns fd; on failure (-errno, the
 * dup) fd is left to the caller. */
int sockpump_start(struct sockpump *p, struct agent *a, uint32_t stream, int fd,
                   void (*on_end)(void *owner), void *owner);
/* Stop both directions and close the socket; sends nothing and does not call on_end. */
void sockpump_close(struct sockpump *p);

#endif
