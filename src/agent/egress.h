/* The egress listener: the only way out of a sandbox. Commands find it through
 * HTTPS_PROXY/HTTP_PROXY (added to the base environment once it listens); every
 * accepted connection becomes a stream the agent opens (even id, op "egress") whose
 * bytes sbxd's proxy judges, logs and relays. See docs/protocol.md and docs/egress.md. */
#ifndef SBX_AGENT_EGRESS_H
#define SBX_AGENT_EGRESS_H

#define EGRESS_PORT 3128
#define EGRESS_PROXY_URL "http://127.0.0.1:3128"
/* Connections tunnelled at once; past it the listener stops accepting (the kernel's
 * backlog holds the rest). */
#define EGRESS_MAX_CONNS 64

struct agent;

/* Listen on 127.0.0.1:EGRESS_PORT. Returns 0 or -errno. */
int egress_listen(struct agent *a);

#endif
