/* Many sbxd nodes behind one API (docs/scale-out.md). Each node registers itself in the
 * shared store and heartbeats; a create is placed on the node with the most free
 * capacity that has the template and backend; a request for a sandbox another node runs
 * is relayed there (forward.h) with a node-to-node credential (credential.h); a node
 * that stops heartbeating has its sandboxes reported node_unreachable until it is back.
 * With one node (SQLite, or PostgreSQL alone) all of this is a node that finds no other. */
#ifndef SBX_CLUSTER_H
#define SBX_CLUSTER_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../config.h"
#include "../http/router.h"
#include "../store/nodes.h"

struct cluster;
struct manager;

/* Become a node of st: claim its id (node_in_use while another process runs as it),
 * check the shared key against the other live nodes', register, and heartbeat. Before
 * the manager starts, which re-adopts this node's sandboxes only. */
int cluster_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct cluster **out, struct sbx_err *err);
/* Once the manager runs: the sandboxes this node holds, for routing, and the daemon
 * a request's handler gets. */
struct sbxd;
void cluster_set_manager(struct cluster *c, struct manager *m, struct sbxd *app);
void cluster_free(struct cluster *c);

/* The router's hooks (http/router.h): node credentials and forwarding. */
const struct router_hooks *cluster_hooks(struct cluster *c);

const char *cluster_node_id(const struct cluster *c);
/* Has n heartbeated recently enough (this node always has)? */
bool cluster_node_live(const struct cluster *c, const struct store_node *n, long long now_ms);

#endif
