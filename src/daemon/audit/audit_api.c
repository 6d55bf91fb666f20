/* GET /v1/audit (admin: everyone's entries; member: their own) and
 * GET /v1/audit/verify (admin): walk the hash chain and name the first broken entry. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../auth/auth.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "retention.h"

#define AUDIT_PAGE_DEFAULT 100
#define AUDIT_PAGE_MAX 500

struct page {
    json_t *data;
    long long last_seq;
};

static void add_entry(const struct store_audit_entry *e, void *arg)
{
    struct page *p = arg;
    json_t *details = e->details ? json_loads(e->details, 0, NULL) : NULL;
    json_t *o = json_pack("{s:s,s:I,s:I,s:s,s:s,s:s,s:s?,s:s,s:s?,s:o?,s:s,s:s}", "object",
                          "audit_entry", "seq", (json_int_t)e->seq, "ts_ms", (json_int_t)e->ts_ms,
                          "user", e->user, "key_id", e->key_id, "action", e->action, "sandbox_id",
                          e->sandbox_id, "outcome", e->outcome, "request_id", e->request_id,
                          "details", details, "prev_hash", e->prev_hash, "hash", e->hash);
    json_array_append_new(p->data, o);
    p->last_seq = e->seq;
}

static void api_audit_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const struct auth_identity *who = http_req_identity(req);
    long long limit = AUDIT_PAGE_DEFAULT, after = 0, since = 0, until = 0;
    const char *bad = "invalid_audit_query";
    if (http_req_query_int(req, "limit", 1, AUDIT_PAGE_MAX, bad, &limit, &err) < 0 ||
        http_req_query_int(req, "after", 0, (1LL << 62), bad, &after, &err) < 0 ||
        http_req_query_int(req, "since", 0, (1LL << 40), bad, &since, &err) < 0 ||
        http_req_query_int(req, "until", 0, (1LL << 40), bad, &until, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const char *user = http_req_query(req, "user");
    /* A member sees only their own entries, whatever they ask for. */
    if (who->role != AUTH_ROLE_ADMIN) {
        if (user && strcmp(user, who->user)) {
            http_respond_errorf(req, "admin_required", "only admins can read other users' audit");
            return;
        }
        user = who->user;
    }
    /* One more than asked, to know whether another page follows. */
    struct store_audit_filter f = {
        .user = user,
        .sandbox_id = http_req_query(req, "sandbox_id"),
        .action = http_req_query(req, "action"),
        .since_ms = since * 1000,
        .until_ms = until ? until * 1000 + 999 : 0,
        .after_seq = after,
        .limit = (int)limit + 1,
    };
    struct page p = {.data = json_array()};
    if (store_audit_query(d->store, &f, add_entry, &p, &err) < 0) {
        json_decref(p.data);
        http_respond_error(req, &err);
        return;
    }
    bool more = json_array_size(p.data) > (size_t)limit;
    if (more)
        json_array_remove(p.data, json_array_size(p.data) - 1);
    json_t *last = json_array_get(p.data, json_array_size(p.data) - 1);
    json_t *o = json_pack("{s:s,s:o,s:b}", "object", "list", "data", p.data, "has_more", more);
    if (more && last)
        json_object_set(o, "next_after", json_object_get(last, "seq"));
    http_respond_json(req, 200, o);
}

static void api_audit_verify(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct store_audit_verdict v;
    if (store_audit_verify(d->store, retention_anchor_key(d->retention), &v, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    json_t *o = json_pack("{s:s,s:b,s:I}", "object", "audit_verification", "ok", v.ok, "checked",
                          (json_int_t)v.checked);
    /* Entries up to the anchor were pruned (retention); the walk started after it. */
    if (v.anchor.present)
        json_object_set_new(o, "anchor",
                            json_pack("{s:I,s:s,s:I}", "seq", (json_int_t)v.anchor.seq, "hash",
                                      v.anchor.hash, "pruned_at_ms",
                                      (json_int_t)v.anchor.pruned_at_ms));
    if (!v.ok) {
        json_object_set_new(o, "first_bad_seq", json_integer(v.bad_seq));
        json_object_set_new(o, "reason", json_string(v.reason));
    }
    http_respond_json(req, 200, o);
}

static const struct route routes[] = {
    {"GET", "/v1/audit/verify", AUTH_ADMIN, api_audit_verify, 0},
    {"GET", "/v1/audit", AUTH_KEY, api_audit_list, 0},
};

const struct route_table audit_routes = ROUTE_TABLE(routes);
