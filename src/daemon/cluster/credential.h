/* The node-to-node credential (docs/scale-out.md). A node that forwards a request to the
 * node running its sandbox never passes the user's key on: it sends who the caller is,
 * as it authenticated them, signed with the key every node of the store shares
 * (<data dir>/cluster.key). The receiving node checks the signature and the time and
 * takes that identity instead of looking a key up.
 *
 *   x-sbx-node:          the sending node's id
 *   x-sbx-node-identity: "KEY_ID USER ROLE TOOL_LEVEL SCOPE", or "-" (a public route)
 *   x-sbx-node-auth:     "v1 TIME_MS PLACED HMAC" (PLACED 1: a create already placed here)
 *   x-sbx-request-id:    the request id the client was given
 *
 * The HMAC-SHA256 covers all four and the method and decoded path. */
#ifndef SBX_CLUSTER_CREDENTIAL_H
#define SBX_CLUSTER_CREDENTIAL_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"
#include "../auth/signurl.h"

#define CLUSTER_HDR_NODE "x-sbx-node"
#define CLUSTER_HDR_IDENTITY "x-sbx-node-identity"
#define CLUSTER_HDR_AUTH "x-sbx-node-auth"
#define CLUSTER_HDR_REQUEST_ID "x-sbx-request-id"
/* How far the sender's clock may be from ours: a captured credential is good this long. */
#define CLUSTER_CRED_SKEW_MS 60000
#define CLUSTER_IDENTITY_MAX (AUTH_KEY_ID_LEN + AUTH_USER_MAX + 48)
#define CLUSTER_AUTH_MAX 96

struct cluster_cred {
    const char *node;       /* the sender */
    const char *method;
    const char *path;       /* decoded, as the router matches it */
    const char *request_id; /* may be "" */
    long long time_ms;
    bool placed;
};

/* The identity and auth header values for a request c describes, made by who. */
void cluster_cred_sign(const struct signurl_key *key, const struct cluster_cred *c,
                       const struct auth_identity *who, char identity[CLUSTER_IDENTITY_MAX + 1],
                       char auth[CLUSTER_AUTH_MAX + 1]);

/* Check the headers of a request (c's method, path, node and request id filled from it;
 * time and placed read from auth) at now_ms: 0 with *who and c->placed set, or
 * -EACCES with invalid_node_credential. */
int cluster_cred_verify(const struct signurl_key *key, struct cluster_cred *c,
                        const char *identity, const char *auth, long long now_ms,
                        struct auth_identity *who, struct sbx_err *err);

#endif
