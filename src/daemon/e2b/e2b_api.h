/* What E2B's control plane (e2b_api.c) shares with its resource files (e2b_secrets.c,
 * e2b_network.c, ...): the key check, the E2B error answer, optional bodies. */
#ifndef SBX_E2B_API_H
#define SBX_E2B_API_H

#include <jansson.h>

#include "../../common/err.h"

struct sbxd;
struct sandbox;
struct http_req;

/* E2B's {"code": <status>, "message", "error_code"}, the status from http/errors.c. */
void e2b_fail(struct http_req *req, const struct sbx_err *err);
void e2b_failf(struct http_req *req, const char *code, const char *msg);
/* The key from X-API-KEY (or Bearer), tool level sandbox; -1 when answered already. */
int e2b_authenticate(struct sbxd *d, struct http_req *req);
/* Authenticate, then the sandbox of path parameter 0; -1 when answered already. */
int e2b_lookup(struct sbxd *d, struct http_req *req, struct sandbox **sb);
/* A JSON object body, {} when empty; -1 when answered already. */
int e2b_optional_body(struct http_req *req, json_t **out);

#endif
