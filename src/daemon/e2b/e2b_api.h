/* What E2B's control plane (e2b_api.c) shares with its resource files (e2b_secrets.c,
 * e2b_network.c, ...): the E2B error answer with a code, the sandbox lookup, optional bodies. */
#ifndef SBX_E2B_API_H
#define SBX_E2B_API_H

#include <jansson.h>

#include "../../common/err.h"
#include "e2b.h" /* e2b_fail, e2b_authenticate */

struct sbxd;
struct sandbox;
struct http_req;

/* e2b_fail with a code and a message. */
void e2b_failf(struct http_req *req, const char *code, const char *msg);
/* Authenticate, then the sandbox of path parameter 0; -1 when answered already. */
int e2b_lookup(struct sbxd *d, struct http_req *req, struct sandbox **sb);
/* A JSON object body, {} when empty; -1 when answered already. */
int e2b_optional_body(struct http_req *req, json_t **out);

#endif
