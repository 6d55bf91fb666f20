/* Routes: method + path pattern -> handler, with the authentication each needs. */
#ifndef SBX_HTTP_ROUTER_H
#define SBX_HTTP_ROUTER_H

struct http_req;
struct sbxd;

/* The dispatch function given to http_server_new. */
void router_dispatch(void *app, struct http_req *req);

#endif
