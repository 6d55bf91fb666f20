/* Where a request is served: here, or on the node that runs its sandbox. The router asks
 * (cluster_intercept) before each handler; GET /v1/nodes shows the nodes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/router.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "../snapshot/snapshot.h"
#include "../store/volumes.h"
#include "cluster_internal.h"
#include "credential.h"
#include "forward.h"

int cluster_node_auth(void *data, struct http_req *req, struct sbx_err *err)
{
    struct cluster *c = data;
    const char *node = http_req_header(req, CLUSTER_HDR_NODE);
    const char *identity = http_req_header(req, CLUSTER_HDR_IDENTITY);
    const char *auth = http_req_header(req, CLUSTER_HDR_AUTH);
    if (!node && !identity && !auth)
        return 0;
    const char *rid = http_req_header(req, CLUSTER_HDR_REQUEST_ID);
    struct cluster_cred cr = {.node = node,
                              .method = http_req_method(req),
                              .path = http_req_path(req),
                              .request_id = rid ? rid : ""};
    struct auth_identity who;
    int r = cluster_cred_verify(&c->key, &cr, identity, auth, sbx_wall_ms(), &who, err);
    if (r < 0)
        return r;
    *http_req_identity(req) = who;
    /* The client was given the forwarding node's id: both nodes log and audit that one. */
    if (rid)
        (void)http_req_set_id(req, rid);
    return 1;
}

static bool from_node(struct http_req *req)
{
    return http_req_header(req, CLUSTER_HDR_AUTH) != NULL; /* verified, or refused already */
}

static void forward_to(struct cluster *c, const struct route *route, struct http_req *req,
                       const char *url, bool placed)
{
    struct cluster_cred cr = {.node = c->id,
                              .method = http_req_method(req),
                              .path = http_req_path(req),
                              .request_id = http_req_id(req),
                              .time_ms = sbx_wall_ms(),
                              .placed = placed};
    char identity[CLUSTER_IDENTITY_MAX + 1], auth[CLUSTER_AUTH_MAX + 1];
    cluster_cred_sign(&c->key, &cr, http_req_identity(req), identity, auth);
    struct forward_headers h = {c->id, identity, auth, http_req_id(req)};
    struct sbx_err err = {0};
    if (forward_request(c->loop, req, url, &h, route->flags & ROUTE_STREAM_BODY, &err) < 0)
        http_respond_error(req, &err);
}

/* --- placement --------------------------------------------------------------------- */

static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchrnul(p, ',');
        if ((size_t)(e - p) == n && !strncmp(p, name, n))
            return true;
        p = *e ? e + 1 : e;
    }
    return false;
}

struct place {
    struct cluster *c;
    const char *tpl, *runtime; /* NULL: any */
    const char *pin;           /* the node of a volume it mounts (docs/volumes.md), or NULL */
    long long now;
    bool found;
    long long best_free;
    char id[STORE_NODE_ID_MAX + 1];
    char url[STORE_NODE_URL_MAX + 1];
};

static void consider(const struct store_node *n, void *data)
{
    struct place *p = data;
    bool self = !strcmp(n->id, p->c->id);
    if (!cluster_node_live(p->c, n, p->now) || strcmp(n->key_fingerprint, p->c->fingerprint) ||
        (p->tpl && !listed(n->templates, p->tpl)) || (p->runtime && !listed(n->backends, p->runtime)) ||
        (p->pin && strcmp(n->id, p->pin)))
        return;
    long long free_slots = n->capacity - n->running;
    /* Most room wins; on a tie, this node (no hop), then the lowest id. */
    if (!p->found || free_slots > p->best_free || (free_slots == p->best_free && self)) {
        p->found = true;
        p->best_free = free_slots;
        snprintf(p->id, sizeof(p->id), "%s", n->id);
        snprintf(p->url, sizeof(p->url), "%s", n->url);
    }
}

/* POST /v1/sandboxes from a client: made here, or relayed to the node with the most room
 * that has the template and backend asked for. A body that does not parse is left to the
 * create's own checks, here. */
static bool place_create(struct cluster *c, const struct route *route, struct http_req *req)
{
    size_t len;
    const char *body = http_req_body(req, &len);
    json_t *j = json_loadb(body, len, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return false;
    }
    struct place p = {.c = c,
                      .tpl = json_string_value(json_object_get(j, "template")),
                      .runtime = json_string_value(json_object_get(j, "runtime")),
                      .now = sbx_wall_ms()};
    struct sbx_err err = {0};
    bool relayed = false;
    /* A volume lives on one node: its sandboxes run there. The first volume the caller
     * owns decides; the create checks the rest (volume_elsewhere). */
    struct store_volume vol;
    json_t *first = json_array_get(json_object_get(j, "volumes"), 0);
    const char *vname = json_string_value(json_object_get(first, "volume"));
    if (vname && store_volume_get(c->store, http_req_identity(req)->user, vname, &vol, NULL) == 0)
        p.pin = vol.node_id;
    if (store_node_each(c->store, consider, &p, &err) == 0 && p.found && strcmp(p.id, c->id)) {
        forward_to(c, route, req, p.url, true);
        relayed = true;
    }
    json_decref(j);
    return relayed;
}

/* --- sandboxes of other nodes ------------------------------------------------------- */

static json_t *row_json(const struct store_sandbox *sb, bool reachable)
{
    json_t *env = json_loads(sb->env_json ? sb->env_json : "{}", 0, NULL);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I},s:b,s:s}", "id",
                     sb->id, "object", "sandbox", "status",
                     reachable ? sb->status : "node_unreachable", "backend", sb->backend,
                     "runtime", sb->runtime, "template", sb->template_name, "template_digest",
                     sb->template_digest, "created_at", (json_int_t)sb->created_at, "expires_at",
                     (json_int_t)sb->expires_at, "ttl_seconds", (json_int_t)sb->ttl_seconds,
                     "env", env ? env : json_object(), "limits", "memory_mb",
                     (json_int_t)sb->memory_mb, "pids", (json_int_t)sb->pids, "cpu_millicores",
                     (json_int_t)sb->cpu_millicores, "enable_default_session",
                     sb->enable_default_session, "node", sb->node_id);
}

/* A resume of a sandbox paused on an unreachable node, taken over from shared storage;
 * the request waits, then goes to its handler here as if the sandbox had always been. */
struct takeover {
    struct cluster *c;
    const struct route *route;
    struct http_req *req; /* NULL once the client went away */
};

static void on_takeover_abort(struct http_req *req, void *data)
{
    struct takeover *t = data;
    t->req = NULL;
}

static void on_taken_over(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct takeover *t = data;
    if (t->req) {
        http_req_suspend(t->req, NULL, NULL);
        if (err)
            http_respond_error(t->req, err);
        else
            t->route->handler(t->c->app, t->req);
    }
    free(t);
}

static bool take_over(struct cluster *c, const struct route *route, struct http_req *req,
                      const struct store_sandbox *sb)
{
    if (!c->cfg->shared_snapshots || !c->mgr || strcmp(route->pattern, "/v1/sandboxes/{}/resume"))
        return false;
    struct takeover *t = sbx_xcalloc(1, sizeof(*t));
    *t = (struct takeover){c, route, req};
    struct sbx_err err = {0};
    if (snapshot_adopt(c->mgr, sb, on_taken_over, t, &err) < 0) {
        free(t);
        http_respond_error(req, &err);
        return true;
    }
    http_req_suspend(req, on_takeover_abort, t);
    return true;
}

static bool node_reachable(struct cluster *c, const char *node_id, struct store_node *out)
{
    struct sbx_err err = {0};
    return store_node_get(c->store, node_id, out, &err) == 0 &&
           cluster_node_live(c, out, sbx_wall_ms());
}

/* A request naming a sandbox this node does not hold: relayed to its node, or answered
 * node_unreachable while that node is silent. Anything else (no such sandbox, another
 * user's) is left to the handler here, which answers as for any unknown sandbox. */
static bool route_to_owner(struct cluster *c, const struct route *route, struct http_req *req,
                           const char *id)
{
    if (!id || !*id || (c->mgr && manager_has(c->mgr, id)) || from_node(req))
        return false;
    struct store_sandbox sb;
    struct sbx_err err = {0};
    if (store_sandbox_get(c->store, id, &sb, &err) < 0)
        return false;
    const struct auth_identity *who = http_req_identity(req);
    bool theirs = !strcmp(sb.node_id, c->id) || !sb.node_id[0] ||
                  (who->authenticated && strcmp(sb.user, who->user));
    if (theirs) {
        store_sandbox_clear(&sb);
        return false;
    }
    struct store_node n;
    if (node_reachable(c, sb.node_id, &n)) {
        forward_to(c, route, req, n.url, false);
    } else if (take_over(c, route, req, &sb)) {
        /* answered, or waiting for the takeover */
    } else if (!strcmp(http_req_method(req), "GET") && !strcmp(route->pattern, "/v1/sandboxes/{}")) {
        http_respond_json(req, 200, row_json(&sb, false));
    } else {
        http_respond_errorf(req, "node_unreachable",
                            "sandbox %s runs on node %s, which has not been heard from: it is "
                            "kept, and answers again when its node is back",
                            sb.id, sb.node_id);
    }
    store_sandbox_clear(&sb);
    return true;
}

/* A request for one of the caller's volumes on another node (its files live there,
 * docs/volumes.md): relayed to that node while it is reachable; else answered here, where
 * volumes/ says volume_elsewhere. */
static bool volume_to_owner(struct cluster *c, const struct route *route, struct http_req *req)
{
    const struct auth_identity *who = http_req_identity(req);
    struct store_volume vol;
    struct store_node n;
    if (from_node(req) || !who->authenticated ||
        store_volume_get(c->store, who->user, http_req_param(req, 0), &vol, NULL) < 0 ||
        !strcmp(vol.node_id, c->id) || !node_reachable(c, vol.node_id, &n))
        return false;
    forward_to(c, route, req, n.url, false);
    return true;
}

struct listing {
    struct cluster *c;
    json_t *rows;  /* [created_at, id, sandbox] */
    json_t *nodes; /* node id -> reachable: each node looked up once per list */
    bool remote;
};

static void add_local(struct sandbox *sb, void *data)
{
    struct listing *l = data;
    json_t *j = sandbox_to_json(sb);
    json_array_append_new(l->rows, json_pack("[I,s,o]", json_integer_value(json_object_get(
                                                            j, "created_at")),
                                             json_string_value(json_object_get(j, "id")), j));
}

static void add_remote(const struct store_sandbox *sb, void *data)
{
    struct listing *l = data;
    if (!strcmp(sb->node_id, l->c->id) || (l->c->mgr && manager_has(l->c->mgr, sb->id)))
        return;
    json_t *known = json_object_get(l->nodes, sb->node_id);
    if (!known) {
        struct store_node n;
        known = json_boolean(node_reachable(l->c, sb->node_id, &n));
        json_object_set_new(l->nodes, sb->node_id, known);
    }
    json_array_append_new(l->rows, json_pack("[I,s,o]", (json_int_t)sb->created_at, sb->id,
                                             row_json(sb, json_is_true(known))));
    l->remote = true;
}

static int by_creation(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t tx = json_integer_value(json_array_get(x, 0)),
               ty = json_integer_value(json_array_get(y, 0));
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return strcmp(json_string_value(json_array_get(x, 1)), json_string_value(json_array_get(y, 1)));
}

/* GET /v1/sandboxes: the caller's sandboxes on every node, in creation order. With none
 * elsewhere, the handler here answers as it always has. */
static bool list_everywhere(struct cluster *c, struct http_req *req)
{
    if (!c->mgr)
        return false;
    struct listing l = {.c = c, .rows = json_array(), .nodes = json_object()};
    struct sbx_err err = {0};
    const char *user = http_req_identity(req)->user;
    int r = store_sandbox_each_live(c->store, user, NULL, add_remote, &l, &err);
    json_decref(l.nodes);
    if (r < 0 || !l.remote) {
        json_decref(l.rows);
        return false;
    }
    manager_each(c->mgr, user, add_local, &l);
    size_t n = json_array_size(l.rows);
    _cleanup_free_ json_t **v = sbx_xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(l.rows, i);
    qsort(v, n, sizeof(*v), by_creation);
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(data, json_array_get(v[i], 2));
    json_decref(l.rows);
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", data));
    return true;
}

bool cluster_intercept(void *data, const struct route *route, struct http_req *req)
{
    struct cluster *c = data;
    const char *p = route->pattern, *method = http_req_method(req);
    if (!strcmp(p, "/v1/sandboxes"))
        return !strcmp(method, "POST") ? !from_node(req) && place_create(c, route, req)
                                       : list_everywhere(c, req);
    if (!strncmp(p, "/v1/sandboxes/{}", 16))
        return route_to_owner(c, route, req, http_req_param(req, 0));
    if (!strncmp(p, "/v1/volumes/{}", 14))
        return volume_to_owner(c, route, req);
    /* E2B's data plane names its sandbox in a header (the SDK always sends it) and carries
     * its own token. Its control plane (/e2b/api) authenticates in its handlers, after
     * this: it is served by the node it reaches (docs/scale-out.md). */
    if (!strncmp(p, "/e2b/sandbox/", 13))
        return route_to_owner(c, route, req, http_req_header(req, "E2b-Sandbox-Id"));
    return false;
}

/* --- GET /v1/nodes ------------------------------------------------------------------ */

struct node_list {
    struct cluster *c;
    json_t *data;
    long long now;
};

static json_t *split(const char *list)
{
    json_t *a = json_array();
    for (const char *p = list; *p;) {
        const char *e = strchrnul(p, ',');
        json_array_append_new(a, json_stringn(p, (size_t)(e - p)));
        p = *e ? e + 1 : e;
    }
    return a;
}

static void add_node(const struct store_node *n, void *data)
{
    struct node_list *l = data;
    bool live = cluster_node_live(l->c, n, l->now);
    json_array_append_new(
        l->data,
        json_pack("{s:s,s:s,s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "id", n->id, "object", "node",
                  "url", n->url, "state", live ? "live" : "unreachable", "self",
                  !strcmp(n->id, l->c->id), "capacity", (json_int_t)n->capacity, "running",
                  (json_int_t)n->running, "free", (json_int_t)(n->capacity - n->running),
                  "started_at_ms", (json_int_t)n->started_at_ms, "heartbeat_age_ms",
                  (json_int_t)(l->now - n->heartbeat_ms), "templates", split(n->templates),
                  "backends", split(n->backends)));
}

static void api_nodes_list(struct sbxd *d, struct http_req *req)
{
    struct node_list l = {d->cluster, json_array(), sbx_wall_ms()};
    struct sbx_err err = {0};
    if (store_node_each(d->store, add_node, &l, &err) < 0) {
        json_decref(l.data);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", l.data));
}

static const struct route routes[] = {
    {"GET", "/v1/nodes", AUTH_ADMIN, api_nodes_list, 0},
};

const struct route_table node_routes = ROUTE_TABLE(routes);

/* The router's hooks: here, beside the functions they name, so that node.c (which this
 * file calls for cluster_node_live) does not call back into this one. */
const struct router_hooks *cluster_hooks(struct cluster *c)
{
    c->hooks = (struct router_hooks){cluster_node_auth, cluster_intercept, c};
    return &c->hooks;
}
