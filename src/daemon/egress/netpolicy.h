/* A configuration's network policy as a sandbox made from it carries it (docs/configs.md):
 * the operator-style layer (deny_egress_by_default, allow_out, deny_out), private
 * endpoints, and the L7 rules in their order. It stands in for the sandbox's own
 * allowlist; a sandbox's own allowlist, when it has one, narrows it further. */
#ifndef SBX_EGRESS_NETPOLICY_H
#define SBX_EGRESS_NETPOLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "policy.h"

struct egress_netpolicy {
    struct egress_operator *op; /* NULL: the configuration has no network object */
    bool allow_private;         /* private ranges may be dialled; link-local, metadata never */
    json_t *rules;              /* [{name, scheme, host?, sni?, methods?, path?, deny, audit,
                                    injects?}] in order, owned */
};

/* From config_doc_network's form ({policy, allow_private_endpoints}). */
int egress_netpolicy_parse(json_t *j, struct egress_netpolicy **out, struct sbx_err *err);
void egress_netpolicy_free(struct egress_netpolicy *n);
/* The first rule matching a connection: https (a CONNECT: host is its name, method and
 * path unknown, NULL) or plain http (method and path of the request). NULL when none. */
const json_t *egress_netpolicy_rule(const struct egress_netpolicy *n, bool https, const char *host,
                                    const char *method, const char *path);

#endif
