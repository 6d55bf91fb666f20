/* Op "tcp_connect" (preview traffic): a connection to 127.0.0.1:port inside the
 * sandbox, relayed as channel 0 (daemon -> socket) and channel 1 (socket -> daemon)
 * with the protocol's flow control. The request names a port only, never a host, so
 * nothing but the sandbox's own loopback is reachable. See docs/protocol.md. */
#ifndef SBX_AGENT_TCPCONN_H
#define SBX_AGENT_TCPCONN_H

#include <jansson.h>
#include <stdint.h>

#include "../common/err.h"

#define TCPCONN_CONNECT_TIMEOUT_MS 10000

struct agent;

int tcpconn_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

#endif
