/* Routes: method + path pattern -> handler, with the authentication each needs. Each
 * feature keeps its own table beside its handlers (its *_api.c); the router is given
 * the list of tables and knows nothing of the features. */
#ifndef SBX_HTTP_ROUTER_H
#define SBX_HTTP_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

struct http_req;
struct sbxd;
struct store;
struct sbx_err;
struct auth_identity;

enum route_auth {
    AUTH_PUBLIC,  /* no key */
    AUTH_KEY,     /* any valid key */
    AUTH_SANDBOX, /* a key with tool level "sandbox" */
    AUTH_ADMIN,   /* an admin key */
    /* Sandbox configurations (docs/configs.md): */
    AUTH_VIEWER_FULL, /* any role, a full-access key */
    AUTH_ADMIN_FULL,  /* an admin key with full access */
};

/* May the authenticated identity k use a route that needs need? 0, or -EACCES/-EPERM with
 * the code a refused request gets. */
int router_allowed(const struct auth_identity *k, enum route_auth need, struct sbx_err *err);

/* The handler takes the body as a stream (uploads) instead of the 1 MiB buffer: it is
 * dispatched right after the headers. */
#define ROUTE_STREAM_BODY 1u

typedef void (*route_handler)(struct sbxd *d, struct http_req *req);

struct route {
    const char *method;
    const char *pattern; /* segments; "{}" captures one segment, a final "{*}" the rest */
    enum route_auth auth;
    route_handler handler;
    unsigned flags; /* ROUTE_* */
};

struct route_table {
    const struct route *routes;
    size_t n;
};
#define ROUTE_TABLE(a)                                                                             \
    {                                                                                              \
        (a), sizeof(a) / sizeof((a)[0])                                                            \
    }

/* What a deployment of many nodes adds to routing (cluster/, docs/scale-out.md), given
 * by main so the router knows nothing of it. */
struct router_hooks {
    /* A request that says it comes from another node: 1 when its credential is good (the
     * request's identity is then the one it carries), 0 when it has none, <0 with err
     * when it is bad. */
    int (*node_auth)(void *data, struct http_req *req, struct sbx_err *err);
    /* Called for each matched, authenticated request before its handler (for a route
     * that streams its body, before the body): true when it took the request (forwarded
     * to another node, or answered). */
    bool (*intercept)(void *data, const struct route *route, struct http_req *req);
    void *data;
};

struct router {
    const struct route_table *const *tables;
    size_t ntables;
    struct store *store; /* keys, for authentication */
    struct sbxd *app;    /* handed to every handler */
    const struct router_hooks *hooks; /* NULL: none */
    /* Tests only (SBX_TEST_ROUTE_LOG): each routed request appends "METHOD PATTERN\n"
     * here, so the run can tell which routes no test requested. NULL: off. */
    const char *route_log;
};

/* Does path match pattern ("/v1/sandboxes/{}/exec": "{}" is one non-empty segment;
 * a final "{*}" is the non-empty rest of the path)?
 * With req, the captured segments become its parameters. */
bool router_match(const char *pattern, const char *path, struct http_req *req);

/* Check key (sent some other way than Authorization: Bearer, e.g. E2B's X-API-KEY) as the
 * router does and, when it is good enough for need, make it the request's identity. */
int router_authenticate_key(struct store *store, struct http_req *req, const char *key,
                            enum route_auth need, struct sbx_err *err);

/* For http_server_set_streaming (app: the struct router). */
bool router_streams_body(void *router, const struct http_req *req);

/* The dispatch function given to http_server_new (app: the struct router). When several
 * patterns match a path, the one with a literal segment where the others capture wins
 * (/v1/sandboxes/run over /v1/sandboxes/{}). */
void router_dispatch(void *router, struct http_req *req);

#endif
