/* The proxy's state, shared by its parts (proxy.c, url_check.c); not for anything outside
 * src/daemon/egress/. */
#ifndef SBX_EGRESS_PROXY_INTERNAL_H
#define SBX_EGRESS_PROXY_INTERNAL_H

#include "proxy.h"

struct egress_conn;
struct mitm_ca;

struct egress_proxy {
    struct loop *loop;
    struct store *store;
    struct egress_resolver *resolver;
    struct egress_operator *op; /* NULL: no operator policy */
    struct mitm_ca *ca;         /* for configurations' inject rules (docs/configs.md) */
    struct egress_conn *conns;
};

#endif
