/* GET /v1/sandboxes/{id}/egress: the sandbox's policy and its connection log, newest
 * first. PUT /v1/sandboxes/{id}/egress: replace the policy of a live sandbox. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "egress_api.h"
#include "proxy.h"

#define EGRESS_PAGE_DEFAULT 100
#define EGRESS_PAGE_MAX 1000

struct page {
    json_t *data;
    long long last_id;
};

static void add_conn(const struct store_egress_conn *c, void *arg)
{
    struct page *p = arg;
    json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:s?,s:i,s:I,s:I,s:I,s:o,s:s,s:s}", "object",
                          "egress_connection", "id", (json_int_t)c->id, "method", c->method, "host",
                          c->host, "address", c->address, "port", (int)c->port, "bytes_sent",
                          (json_int_t)c->bytes_up, "bytes_received", (json_int_t)c->bytes_down,
                          "started_at_ms", (json_int_t)c->started_at_ms, "ended_at_ms",
                          c->ended_at_ms ? json_integer(c->ended_at_ms) : json_null(), "verdict",
                          c->verdict, "reason", c->reason);
    json_array_append_new(p->data, o);
    p->last_id = c->id;
}

static void api_egress_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    long long limit = EGRESS_PAGE_DEFAULT, before = 0;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        http_req_query_int(req, "limit", 1, EGRESS_PAGE_MAX, "invalid_request", &limit, &err) < 0 ||
        http_req_query_int(req, "before", 1, (1LL << 62), "invalid_request", &before, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    /* One more than asked says whether there is another page. */
    struct page p = {.data = json_array()};
    if (store_egress_log_query(d->store, sb->rec.id, before, (int)limit + 1, add_conn, &p, &err) <
        0) {
        json_decref(p.data);
        http_respond_error(req, &err);
        return;
    }
    bool more = json_array_size(p.data) > (size_t)limit;
    if (more)
        json_array_remove(p.data, (size_t)limit);
    json_t *policy =
        sb->egress ? egress_policy_to_json(sb->egress) : json_pack("{s:s}", "mode", "none");
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:o,s:o,s:b}", "object", "list", "sandbox_id", sb->rec.id,
                                "policy", policy, "data", p.data, "has_more", more));
}

int egress_replace(struct sbxd *d, struct sandbox *sb, const struct auth_identity *who,
                   const char *request_id, const struct egress_policy *pol, struct sbx_err *err)
{
    json_t *j = egress_policy_to_json(pol);
    char *text = json_dumps(j, JSON_COMPACT);
    int r = store_egress_policy_set(d->store, sb->rec.id, text, sbx_wall_ms() / 1000, err);
    free(text);
    if (r < 0) {
        json_decref(j);
        return r;
    }
    if (!sb->egress)
        sb->egress = sbx_xmalloc(sizeof(*sb->egress));
    *sb->egress = *pol;
    audit_record(d->store, who, NULL, request_id, "sandbox.egress", sb->rec.id, "ok",
                 json_pack("{s:o}", "policy", j));
    if (d->egress)
        egress_proxy_policy_changed(d->egress, sb->rec.id);
    return 0;
}

static void api_egress_put(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL;
    struct egress_policy pol;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        http_req_json(req, &body, &err) < 0 || egress_policy_parse(body, &pol, &err) < 0 ||
        egress_replace(d, sb, http_req_identity(req), http_req_id(req), &pol, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    http_respond_json(req, 200, sandbox_to_json(sb));
}

static const struct route routes[] = {
    {"GET", "/v1/sandboxes/{}/egress", AUTH_SANDBOX, api_egress_get, 0},
    {"PUT", "/v1/sandboxes/{}/egress", AUTH_SANDBOX, api_egress_put, 0},
};

const struct route_table egress_routes = ROUTE_TABLE(routes);
