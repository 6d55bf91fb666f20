/* Routes: method + path pattern -> handler, with the authentication each needs. */
#ifndef SBX_HTTP_ROUTER_H
#define SBX_HTTP_ROUTER_H

struct http_req;
struct sbxd;

#include <stdbool.h>

/* Does path match pattern ("/v1/sandboxes/{}/exec": "{}" is one non-empty segment)?
 * With req, the captured segments become its parameters. */
bool router_match(const char *pattern, const char *path, struct http_req *req);

/* The dispatch function given to http_server_new. */
void router_dispatch(void *app, struct http_req *req);

#endif
