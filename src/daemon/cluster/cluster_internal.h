/* Shared by cluster/'s files; nothing outside it sees the struct. */
#ifndef SBX_CLUSTER_INTERNAL_H
#define SBX_CLUSTER_INTERNAL_H

#include "../auth/signurl.h"
#include "cluster.h"

struct cluster {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct store *store;
    struct manager *mgr; /* NULL until the manager runs */
    struct sbxd *app;    /* handed to a route's handler once a takeover is done */
    char id[STORE_NODE_ID_MAX + 1];
    char url[STORE_NODE_URL_MAX + 1];
    struct signurl_key key; /* <data dir>/cluster.key, the same on every node */
    char fingerprint[17];
    struct loop_timer *beat;
    struct router_hooks hooks;
};

/* The router hooks (cluster_api.c). */
int cluster_node_auth(void *data, struct http_req *req, struct sbx_err *err);
bool cluster_intercept(void *data, const struct route *route, struct http_req *req);

/* The template names this node has built, comma-separated (at most cap bytes). */
void cluster_templates(const struct cluster *c, char *out, size_t cap);

#endif
