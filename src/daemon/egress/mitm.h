/* One intercepted HTTPS connection (docs/configs.md): TLS ended towards the sandbox with
 * a leaf of the per-daemon CA, TLS started towards the upstream and verified as a
 * client would, and in between the first request's head read (http/reqhead.c), the
 * configuration's headers put in (any the client sent of the same names dropped) and
 * Connection: close forced, so one request goes per connection and every request is
 * seen. Bytes in and out only: the proxy keeps the socket and the channel. */
#ifndef SBX_EGRESS_MITM_H
#define SBX_EGRESS_MITM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "mitm_ca.h"

#define MITM_HEAD_MAX (16u * 1024u)
#define MITM_HEADERS_MAX 100

struct mitm;

struct mitm_io {
    void (*to_client)(void *data, const uint8_t *buf, size_t len);   /* TLS records down */
    void (*to_upstream)(void *data, const uint8_t *buf, size_t len); /* TLS records up */
};

/* headers: [{header, value}] to put into requests matching methods (array or NULL: any)
 * and path (a prefix, or NULL). */
struct mitm *mitm_new(struct mitm_ca *ca, const char *host, json_t *headers, const json_t *methods,
                      const char *path, const struct mitm_io *io, void *data, struct sbx_err *err);
void mitm_free(struct mitm *m);
/* Bytes from the sandbox / from the upstream. -EPROTO when either side's TLS fails (err
 * says why: a bad certificate upstream, a handshake the client broke off, a malformed
 * request head); the connection is then over. */
int mitm_from_client(struct mitm *m, const uint8_t *buf, size_t len, struct sbx_err *err);
int mitm_from_upstream(struct mitm *m, const uint8_t *buf, size_t len, struct sbx_err *err);
/* The client or the upstream closed its side: pass a close_notify on. */
void mitm_client_eof(struct mitm *m);
void mitm_upstream_eof(struct mitm *m);
/* Plain text held for a side whose handshake is not done yet: what the proxy counts
 * against its bounds along with its own queues. */
size_t mitm_buffered(const struct mitm *m);
/* How many headers went into the request (0 until its head passed, or when it did not
 * match the rule's methods or path). */
unsigned mitm_injected(const struct mitm *m);

#endif
