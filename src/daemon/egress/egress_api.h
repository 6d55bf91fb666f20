/* Replacing a live sandbox's egress policy, for PUT /v1/sandboxes/{id}/egress and E2B's
 * PUT /sandboxes/{id}/network (e2b/e2b_api.c): stored, swapped in, audited as
 * sandbox.egress, and connections it no longer allows are cut. */
#ifndef SBX_EGRESS_API_H
#define SBX_EGRESS_API_H

#include "../../common/err.h"
#include "policy.h"

struct sbxd;
struct sandbox;
struct auth_identity;

int egress_replace(struct sbxd *d, struct sandbox *sb, const struct auth_identity *who,
                   const char *request_id, const struct egress_policy *pol, struct sbx_err *err);

#endif
