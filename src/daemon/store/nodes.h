/* The nodes of a store shared by many sbxd (docs/scale-out.md): each registers itself,
 * heartbeats, and is placed on by the others. */
#ifndef SBX_STORE_NODES_H
#define SBX_STORE_NODES_H

#include "store.h"

#define STORE_NODE_URL_MAX 255
#define STORE_NODE_TEMPLATES_MAX 4096 /* comma-separated template names */
#define STORE_NODE_BACKENDS_MAX 63

struct store_node {
    char id[STORE_NODE_ID_MAX + 1];
    char url[STORE_NODE_URL_MAX + 1]; /* what other nodes dial: http://ADDR:PORT */
    long long capacity;               /* sandboxes it takes, creating or running */
    char templates[STORE_NODE_TEMPLATES_MAX + 1];
    char backends[STORE_NODE_BACKENDS_MAX + 1];
    char key_fingerprint[65]; /* of its node-to-node key: nodes of one store share it */
    long long started_at_ms, heartbeat_ms;
    long long running; /* read only: its creating or running sandboxes */
};

/* Insert or replace n's row (a node's start). */
int store_node_register(struct store *s, const struct store_node *n, struct sbx_err *err);
/* A node says it is alive, with the templates it has now. */
int store_node_heartbeat(struct store *s, const char *id, long long now_ms, const char *templates,
                         struct sbx_err *err);
/* -ENOENT (node_not_found) for an id no node registered. */
int store_node_get(struct store *s, const char *id, struct store_node *out, struct sbx_err *err);
typedef void (*store_node_cb)(const struct store_node *n, void *data);
/* Every registered node, by id. */
int store_node_each(struct store *s, store_node_cb cb, void *data, struct sbx_err *err);

#endif
