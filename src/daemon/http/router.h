/* Routes: method + path pattern -> handler, with the authentication each needs. */
#ifndef SBX_HTTP_ROUTER_H
#define SBX_HTTP_ROUTER_H

struct http_req;
struct sbxd;

#include <stdbool.h>

/* Does path match pattern ("/v1/sandboxes/{}/exec": "{}" is one non-empty segment;
 * a final "{*}" is the non-empty rest of the path)?
 * With req, the captured segments become its parameters. */
bool router_match(const char *pattern, const char *path, struct http_req *req);

/* For http_server_set_streaming: routes that take their body as a stream. */
bool router_streams_body(void *app, const struct http_req *req);

/* The dispatch function given to http_server_new. */
void router_dispatch(void *app, struct http_req *req);

#endif
