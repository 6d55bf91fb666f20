/* E2B's network object as sbx's egress (e2b_network.c, docs/e2b.md). */
#ifndef SBX_E2B_NETWORK_H
#define SBX_E2B_NETWORK_H

#include <jansson.h>

#include "../../common/err.h"
#include "../egress/policy.h"
#include "../sandbox/params.h"

struct sbxd;
struct sandbox;
struct auth_identity;

struct e2b_network {
    struct egress_policy egress; /* the sandbox's own policy */
    json_t *doc; /* NULL, or a configuration document (sealed) whose network it gets */
};

/* network (create's or an update's body, may be NULL), internet (allow_internet_access,
 * may be NULL), for a sandbox of user's on template_name. invalid_request (400),
 * e2b_not_supported (501) for egressProxy and workload identity tokens. */
int e2b_network_parse(struct sbxd *d, const char *user, json_t *network, json_t *internet,
                      const char *template_name, struct e2b_network *out, struct sbx_err *err);
void e2b_network_clear(struct e2b_network *n);
/* At create: p's egress, and the configuration-style network when there is one (what p
 * then points to lives in *hold until the create is done). */
int e2b_network_apply(struct sbxd *d, const struct auth_identity *who, struct e2b_network *n,
                      struct sandbox_params *p, json_t **hold, struct sbx_err *err);
/* On an update, before egress_replace with n->egress: the sandbox's network and injected
 * headers replaced. A sandbox of a stored configuration refuses (sandbox_config_widened). */
int e2b_network_update(struct sbxd *d, struct sandbox *sb, struct e2b_network *n,
                       struct sbx_err *err);

#endif
