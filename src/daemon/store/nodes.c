#include "nodes.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_internal.h"

#define NODE_COLS                                                                                  \
    "n.id,n.url,n.capacity,n.templates,n.backends,n.key_fingerprint,n.started_at_ms,"             \
    "n.heartbeat_ms,(SELECT count(*) FROM sandboxes b WHERE b.node_id=n.id AND "                  \
    "b.status IN ('creating','running'))"

static void row_to_node(struct db_stmt *st, struct store_node *n)
{
    memset(n, 0, sizeof(*n));
    db_col_copy(st, 0, n->id, sizeof(n->id));
    db_col_copy(st, 1, n->url, sizeof(n->url));
    n->capacity = db_col_int64(st, 2);
    db_col_copy(st, 3, n->templates, sizeof(n->templates));
    db_col_copy(st, 4, n->backends, sizeof(n->backends));
    db_col_copy(st, 5, n->key_fingerprint, sizeof(n->key_fingerprint));
    n->started_at_ms = db_col_int64(st, 6);
    n->heartbeat_ms = db_col_int64(st, 7);
    n->running = db_col_int64(st, 8);
}

int store_node_register(struct store *s, const struct store_node *n, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO nodes(id,url,capacity,templates,backends,key_fingerprint,"
                     "started_at_ms,heartbeat_ms) VALUES(?,?,?,?,?,?,?,?) "
                     "ON CONFLICT(id) DO UPDATE SET url=excluded.url, "
                     "capacity=excluded.capacity, templates=excluded.templates, "
                     "backends=excluded.backends, key_fingerprint=excluded.key_fingerprint, "
                     "started_at_ms=excluded.started_at_ms, heartbeat_ms=excluded.heartbeat_ms",
                     "ttitttii", n->id, n->url, n->capacity, n->templates, n->backends,
                     n->key_fingerprint, n->started_at_ms, n->heartbeat_ms);
    return r < 0 ? r : db_run(st, err);
}

int store_node_heartbeat(struct store *s, const char *id, long long now_ms, const char *templates,
                         struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE nodes SET heartbeat_ms=?, templates=? WHERE id=?", "itt", now_ms,
                     templates, id);
    return r < 0 ? r : db_run(st, err);
}

int store_node_get(struct store *s, const char *id, struct store_node *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT " NODE_COLS " FROM nodes n WHERE n.id=?", "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        row_to_node(st, out);
        r = 0;
    } else if (r == DB_DONE) {
        r = sbx_err_set(err, ENOENT, "node_not_found", "no node with id %.64s", id);
    }
    db_finalize(st);
    return r;
}

int store_node_each(struct store *s, store_node_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT " NODE_COLS " FROM nodes n ORDER BY n.id", "");
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_node n;
        row_to_node(st, &n);
        cb(&n, data);
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}
