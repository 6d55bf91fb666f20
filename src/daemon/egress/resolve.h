/* Name resolution for the egress proxy, off the event loop, and the last word on which
 * addresses may be dialled. getaddrinfo runs on the resolver's own worker threads (a slow
 * DNS server never stalls the loop or the artifact jobs); results come back on the loop.
 *
 * Test knobs (docs/egress.md), both for tests only:
 *   hosts_file      names are looked up in this file ("ADDR NAME..." lines) and nowhere
 *                   else, so a test's traffic never leaves the machine;
 *   test_upstreams  "ADDR:PORT,..." exact pairs exempt from the address classes (a test's
 *                   upstream on loopback); every other address and port stays refused. */
#ifndef SBX_EGRESS_RESOLVE_H
#define SBX_EGRESS_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "addr.h"

#define EGRESS_RESOLVE_MAX_ADDRS 16
#define EGRESS_HOSTS_FILE_MAX (1024 * 1024)
#define EGRESS_TEST_UPSTREAMS_MAX 16

struct egress_resolver;
struct egress_lookup;

/* status 0 with n >= 1 addresses, or a negative errno (-ENOENT: no such name). */
typedef void (*egress_resolved_fn)(void *data, int status, const struct egress_addr *addrs,
                                   size_t n);

int egress_resolver_new(struct loop *l, const char *hosts_file, const char *test_upstreams,
                        struct egress_resolver **out, struct sbx_err *err);
void egress_resolver_free(struct egress_resolver *r);
/* cb runs later on the loop, unless the lookup is cancelled first. */
struct egress_lookup *egress_resolve(struct egress_resolver *r, const char *host,
                                     egress_resolved_fn cb, void *data);
void egress_lookup_cancel(struct egress_lookup *q);
/* Why addr:port may never be dialled (an address class, or "daemon_address" for one of
 * this host's own addresses), or NULL. */
const char *egress_resolver_addr_check(const struct egress_resolver *r,
                                       const struct egress_addr *addr, unsigned port);
/* The same, letting private ranges through when allow_private (a configuration's
 * allow_private_endpoints); this host's own addresses stay refused. */
const char *egress_resolver_addr_check_private(const struct egress_resolver *r,
                                               const struct egress_addr *addr, unsigned port,
                                               bool allow_private);

#endif
