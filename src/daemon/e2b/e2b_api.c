/* Import circle with e2b_network.c, e2b_snapshots.c, e2b_volumes.c (allowed inside a folder,
 * docs/architecture.md#layering): create and the network update call them, and they answer
 * through this file's key check and E2B error (e2b_api.h). */
/* E2B's control plane under /e2b/api (docs/e2b.md), on the same manager as /v1/sandboxes:
 *   POST   /e2b/api/sandboxes, /e2b/api/v2/sandboxes         create
 *   GET    /e2b/api/sandboxes, /e2b/api/v2/sandboxes         list (limit, nextToken, state,
 * metadata) GET    /e2b/api/sandboxes/{id}                           get DELETE
 * /e2b/api/sandboxes/{id}                           kill POST   /e2b/api/sandboxes/{id}/timeout
 * {timeout}: expire that many s from now POST   /e2b/api/sandboxes/{id}/pause POST
 * /e2b/api/sandboxes/{id}/connect, /resume, /e2b/api/v2/sandboxes/{id}/connect GET
 * /e2b/api/sandboxes/{id}/metrics                   one sample now X-API-KEY carries an sbx key
 * (Authorization: Bearer works too). Errors are E2B's
 * {"code": <status>, "message"}: the SDK reads code (kill answers false on 404). */
#include <errno.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/errors.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../egress/egress_api.h"
#include "../live/preview.h"
#include "../sbxd.h"
#include "../snapshot/snapcall.h"
#include "../snapshot/snapshot.h"
#include "../sandbox/template.h"
#include "e2b.h"
#include "e2b_api.h"
#include "e2b_network.h"
#include "e2b_snapshots.h"
#include "e2b_templates.h"
#include "e2b_volumes.h"

#define E2B_TIMEOUT_DEFAULT 300
#define E2B_LIST_LIMIT_MAX 100
#define E2B_METADATA_FILTERS_MAX 16

void e2b_failf(struct http_req *req, const char *code, const char *msg)
{
    struct sbx_err e = {.errnum = EINVAL};
    snprintf(e.code, sizeof(e.code), "%s", code);
    snprintf(e.msg, sizeof(e.msg), "%s", msg);
    e2b_fail(req, &e);
}

static int lookup(struct sbxd *d, struct http_req *req, struct sandbox **sb)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return -1;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), sb, &err) < 0) {
        e2b_fail(req, &err);
        return -1;
    }
    return 0;
}

/* An optional JSON object body ({} when empty). */
static int optional_body(struct http_req *req, json_t **out)
{
    struct sbx_err err = {0};
    size_t n;
    http_req_body(req, &n);
    if (n == 0) {
        *out = json_object();
        return 0;
    }
    if (http_req_json(req, out, &err) < 0) {
        e2b_fail(req, &err);
        return -1;
    }
    return 0;
}

/* timeout (seconds) from body: def when absent. */
static int timeout_field(struct http_req *req, json_t *body, long long def, long long *out)
{
    json_t *t = json_object_get(body, "timeout");
    if (!t || json_is_null(t)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(t) || json_integer_value(t) < 1 ||
        json_integer_value(t) > SANDBOX_TTL_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg), "timeout must be an integer from 1 to %d seconds",
                 SANDBOX_TTL_MAX);
        e2b_failf(req, "invalid_ttl", msg);
        return -1;
    }
    *out = json_integer_value(t);
    return 0;
}

/* The opening of connect, timeout and fork: the key, the sandbox, the optional body and
 * its timeout (def when absent); -1 once answered. With body the caller keeps (and frees)
 * the body, without it is dropped. */
static int lookup_ttl(struct sbxd *d, struct http_req *req, long long def, struct sandbox **sb,
                      long long *ttl, json_t **body)
{
    json_t *b;
    if (lookup(d, req, sb) < 0 || optional_body(req, &b) < 0)
        return -1;
    int r = timeout_field(req, b, def, ttl);
    if (r < 0 || !body)
        json_decref(b);
    else
        *body = b;
    return r;
}

/* ---- answering with the Sandbox object, after the sandbox is made ready for E2B ---- */

/* A create, connect or resume in flight. The request may go away; the work goes on. */
struct sbx_op {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    struct sandbox *sb;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    const char *action;
    unsigned status;
};

/* E2B's Sandbox object for sb (its access token made on first use), or NULL and err. */
static json_t *sandbox_json(struct sbxd *d, struct sandbox *sb, struct sbx_err *err)
{
    char token[E2B_TOKEN_HEX_LEN + 1], dom[256], traffic[PREVIEW_TRAFFIC_TOKEN_MAX + 1];
    if (e2b_access_token(d, sb, token, err) < 0)
        return NULL;
    json_t *info = e2b_sandbox_info(d, sb);
    struct sbx_err terr = {0};
    bool has_traffic = store_meta_get(d->store, sb->rec.id, PREVIEW_META_TRAFFIC_TOKEN, traffic,
                                      sizeof(traffic), &terr) == 0;
    json_t *o = json_pack("{s:O,s:O,s:O,s:s,s:s,s:s,s:s,s:s?}", "sandboxID",
                          json_object_get(info, "sandboxID"), "templateID",
                          json_object_get(info, "templateID"), "alias",
                          json_object_get(info, "alias"), "clientID", "sbx", "envdVersion",
                          E2B_ENVD_VERSION, "envdAccessToken", token, "domain",
                          e2b_domain(d, dom, sizeof(dom)), "trafficAccessToken",
                          has_traffic ? traffic : NULL);
    json_decref(info);
    return o;
}

static void answer_sandbox(struct sbx_op *x)
{
    if (x->req) {
        struct sbx_err err = {0};
        json_t *o = sandbox_json(x->d, x->sb, &err);
        if (!o)
            e2b_fail(x->req, &err);
        else
            http_respond_json(x->req, x->status, o);
    }
    free(x);
}

static void on_op_abort(struct http_req *req, void *data)
{
    struct sbx_op *x = data;
    sandbox_drop_waiter(x->sb, x); /* the create or resume itself goes on */
    free(x);
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct sbx_op *x = data;
    audit_record(x->d->store, &x->who, NULL, x->request_id, x->action, sb->rec.id,
                 err ? err->code : "ok", json_pack("{s:s}", "via", "e2b"));
    if (err) {
        if (x->req)
            e2b_fail(x->req, err);
        free(x);
        return;
    }
    answer_sandbox(x);
}

static struct sbx_op *op_new(struct sbxd *d, struct http_req *req, const char *action,
                             unsigned status)
{
    struct sbx_op *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->request_id, sizeof(x->request_id), "%s", http_req_id(req));
    x->action = action;
    x->status = status;
    return x;
}

/* ---- create ---- */

static int check_metadata(json_t *m, struct sbx_err *err)
{
    const char *k;
    json_t *v;
    if (!json_is_object(m))
        return sbx_err_set(err, EINVAL, "invalid_request", "metadata must be an object of strings");
    json_object_foreach(m, k, v) if (!json_is_string(v)) return sbx_err_set(
        err, EINVAL, "invalid_request", "metadata.%.64s must be a string", k);
    return 0;
}

static int traffic_set(struct sbxd *d, const struct sandbox *sb, bool public, struct sbx_err *err)
{
    if (public)
        return store_meta_set(d->store, sb->rec.id, PREVIEW_META_PUBLIC, "1", err);
    char tok[E2B_TOKEN_HEX_LEN + 1];
    sbx_random_id("", E2B_TOKEN_HEX_LEN / 2, tok, sizeof(tok));
    return store_meta_set(d->store, sb->rec.id, PREVIEW_META_TRAFFIC_TOKEN, tok, err);
}

static void api_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *params = NULL, *hold = NULL;
    _cleanup_free_ char *meta = NULL, *snap_from = NULL;
    struct e2b_network net = {0};
    struct sandbox_params p;
    struct sandbox *sb;
    long long ttl;
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        return;
    if (r < 0)
        goto fail;
    json_t *t = json_object_get(body, "templateID");
    if (t && !json_is_string(t)) {
        sbx_err_set(&err, EINVAL, "invalid_template", "templateID must be a template name");
        goto fail;
    }
    const char *tmpl = t ? json_string_value(t) : "base";
    /* A snapshot's id or name (e2b_snapshots.c): its template, over its workspace. */
    char snap_tmpl[STORE_NAME_MAX + 1], named[TEMPLATE_NAME_MAX + 1];
    const char *sbx_tmpl = named;
    if (e2b_snapshot_source(d, http_req_identity(req)->user, tmpl, snap_tmpl, sizeof(snap_tmpl),
                            &snap_from) == 1)
        sbx_tmpl = snap_tmpl;
    else if (e2b_snapshot_id(tmpl)) {
        sbx_err_set(&err, ENOENT, "snapshot_not_found", "snapshot %.64s not found", tmpl);
        goto fail;
    } else if (e2b_template_for_create(d, tmpl, named, sizeof(named), &err) < 0)
        goto fail;
    if (timeout_field(req, body, E2B_TIMEOUT_DEFAULT, &ttl) < 0) {
        json_decref(body);
        return;
    }
    json_t *md = json_object_get(body, "metadata");
    if (md && !json_is_null(md)) {
        if (check_metadata(md, &err) < 0)
            goto fail;
        meta = json_dumps(md, JSON_COMPACT | JSON_SORT_KEYS);
        if (strlen(meta) >= E2B_METADATA_MAX) {
            sbx_err_set(&err, EINVAL, "invalid_request", "metadata is larger than %u bytes",
                        E2B_METADATA_MAX - 1);
            goto fail;
        }
    }
    /* network.allowPublicTraffic (E2B's default true): getHost(port) names reach the
     * sandbox's ports without a token; false: only with the answer's trafficAccessToken. */
    json_t *pub = json_object_get(json_object_get(body, "network"), "allowPublicTraffic");
    if (pub && !json_is_boolean(pub) && !json_is_null(pub)) {
        sbx_err_set(&err, EINVAL, "invalid_request", "network.allowPublicTraffic must be a boolean");
        goto fail;
    }
    json_t *env = json_object_get(body, "envVars");
    if (e2b_network_parse(d, http_req_identity(req)->user, json_object_get(body, "network"),
                          json_object_get(body, "allow_internet_access"), sbx_tmpl, &net,
                          &err) < 0)
        goto fail;
    json_t *mounts;
    if (e2b_volume_mounts(json_object_get(body, "volumeMounts"), &mounts, &err) < 0)
        goto fail;
    params = json_pack("{s:s,s:I,s:O?,s:o?}", "template", sbx_tmpl, "ttl_seconds",
                       (json_int_t)ttl, "env", json_is_null(env) ? NULL : env, "volumes", mounts);
    if (sandbox_params_parse(params, &p, &err) < 0 ||
        e2b_network_apply(d, http_req_identity(req), &net, &p, &hold, &err) < 0)
        goto fail;
    if (snap_from)
        p.workspace_from = snap_from;
    struct sbx_op *x = op_new(d, req, "sandbox.create", 201);
    if (manager_create(d->mgr, http_req_identity(req), &p, on_ready, x, &sb, &err) < 0) {
        free(x);
        goto fail;
    }
    x->sb = sb;
    struct sbx_err merr = {0};
    if (store_meta_set(d->store, sb->rec.id, E2B_META_TEMPLATE, tmpl, &merr) < 0 ||
        (meta && store_meta_set(d->store, sb->rec.id, E2B_META_METADATA, meta, &merr) < 0) ||
        traffic_set(d, sb, !json_is_false(pub), &merr) < 0)
        log_warn("sandbox %s: storing its e2b facts: %s", sb->rec.id, merr.msg);
    json_decref(hold);
    e2b_network_clear(&net);
    json_decref(params);
    json_decref(body);
    http_req_suspend(req, on_op_abort, x);
    return;
fail:
    json_decref(hold);
    e2b_network_clear(&net);
    json_decref(params);
    json_decref(body);
    e2b_fail(req, &err);
}

/* ---- connect (resumes a paused sandbox) ---- */

static void api_connect(struct sbxd *d, struct http_req *req)
{
    struct sandbox *sb;
    long long ttl;
    if (lookup_ttl(d, req, 0, &sb, &ttl, NULL) < 0)
        return;
    struct sbx_err err = {0};
    long long want = sbx_wall_ms() / 1000 + ttl;
    if (ttl && want > sb->rec.expires_at && manager_set_expiry(d->mgr, sb, want, &err) < 0) {
        e2b_fail(req, &err);
        return;
    }
    struct sbx_op *x = op_new(d, req, "sandbox.resume", sb->paused ? 201 : 200);
    x->sb = sb;
    if (!sb->paused) {
        answer_sandbox(x);
        return;
    }
    http_req_suspend(req, on_op_abort, x);
    if (snapshot_resume(d->mgr, sb, on_ready, x, &err) < 0) {
        free(x);
        e2b_fail(req, &err);
    }
}

/* ---- list, get ---- */

/* Go's url.QueryUnescape: '+' is a space. */
static void query_unescape(char *s)
{
    for (char *c = s; *c; c++)
        if (*c == '+')
            *c = ' ';
    http_url_decode(s);
}

struct list_ctx {
    struct sbxd *d;
    json_t *items;
    const char *after; /* nextToken: the id of the last sandbox of the page before */
    bool seen_after;
    bool want_running, want_paused;
    json_t *filters; /* {key: value} every one must match */
    long long limit;
    const char *next; /* set when the page is full and more follow */
};

static void list_one(struct sandbox *sb, void *data)
{
    struct list_ctx *c = data;
    if (c->after && !c->seen_after) {
        c->seen_after = !strcmp(sb->rec.id, c->after);
        return;
    }
    if (c->next || sb->ended || (sb->paused ? !c->want_paused : !c->want_running))
        return;
    json_t *info = e2b_sandbox_info(c->d, sb);
    json_t *md = json_object_get(info, "metadata");
    const char *k;
    json_t *v;
    json_object_foreach(c->filters, k, v)
    {
        json_t *have = json_object_get(md, k);
        if (!json_is_string(have) || strcmp(json_string_value(have), json_string_value(v))) {
            json_decref(info);
            return;
        }
    }
    if ((long long)json_array_size(c->items) == c->limit) {
        json_decref(info);
        json_t *last = json_array_get(c->items, json_array_size(c->items) - 1);
        c->next = json_string_value(json_object_get(last, "sandboxID"));
        return;
    }
    json_array_append_new(c->items, info);
}

/* metadata=k%3Dv%26k2%3Dv2 (already decoded once): decode, split, decode each part. */
static int parse_metadata_filter(const char *q, json_t *out, struct sbx_err *err)
{
    _cleanup_free_ char *s = sbx_xstrdup(q);
    query_unescape(s);
    char *save = NULL;
    for (char *pair = strtok_r(s, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        if (!eq || strchr(eq + 1, '=') || json_object_size(out) >= E2B_METADATA_FILTERS_MAX)
            return sbx_err_set(err, EINVAL, "invalid_request", "invalid key value pair in query");
        *eq = '\0';
        query_unescape(pair);
        query_unescape(eq + 1);
        json_object_set_new(out, pair, json_string(eq + 1));
    }
    return 0;
}

/* v1 lists running sandboxes unless asked (E2B's GET /sandboxes); v2 every state. */
static void list_states(struct sbxd *d, struct http_req *req, bool v1)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    struct list_ctx c = {.d = d, .limit = E2B_LIST_LIMIT_MAX, .filters = json_object()};
    if (http_req_query_int(req, "limit", 1, E2B_LIST_LIMIT_MAX, "invalid_request", &c.limit, &err) <
        0)
        goto fail;
    c.after = http_req_query(req, "nextToken");
    if (c.after && !*c.after)
        c.after = NULL;
    const char *state = http_req_query(req, "state");
    c.want_running = !state || strstr(state, "running");
    c.want_paused = state ? strstr(state, "paused") != NULL : !v1;
    const char *md = http_req_query(req, "metadata");
    if (md && parse_metadata_filter(md, c.filters, &err) < 0)
        goto fail;
    c.items = json_array();
    manager_each(d->mgr, http_req_identity(req)->user, list_one, &c);
    if (c.next)
        http_req_add_header(req, "X-Next-Token", c.next);
    json_decref(c.filters);
    http_respond_json(req, 200, c.items);
    return;
fail:
    json_decref(c.filters);
    e2b_fail(req, &err);
}

static void api_list_v1(struct sbxd *d, struct http_req *req)
{
    list_states(d, req, true);
}

static void api_list(struct sbxd *d, struct http_req *req)
{
    list_states(d, req, false);
}

static void api_get(struct sbxd *d, struct http_req *req)
{
    struct sandbox *sb;
    if (lookup(d, req, &sb) < 0)
        return;
    char dom[256];
    json_t *info = e2b_sandbox_info(d, sb);
    json_object_set_new(info, "domain", json_string(e2b_domain(d, dom, sizeof(dom))));
    http_respond_json(req, 200, info);
}

/* E2B's SandboxMetric, one sample taken now (sbx keeps no history): CPU time over the
 * time since the container started, at the cores it has; the memory its cgroup counts
 * against its memory_mb; its workspace's disk. A sandbox with no running machine (paused,
 * v1 between ops) has no sample: []. */
static void api_metrics(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (lookup(d, req, &sb) < 0)
        return;
    struct sandbox_usage u;
    int r = manager_usage(sb, &u, &err);
    if (r == -ENOENT) {
        http_respond_json(req, 200, json_array());
        return;
    }
    if (r < 0) {
        e2b_fail(req, &err);
        return;
    }
    long long cpus = (sb->rec.cpu_millicores + 999) / 1000;
    if (cpus < 1)
        cpus = 1;
    double pct =
        u.running_ms > 0 ? (double)u.cpu_usec / 10.0 / (double)u.running_ms / (double)cpus : 0.0;
    long long now = sbx_wall_ms() / 1000;
    json_t *m =
        json_pack("{s:o,s:I,s:I,s:f,s:I,s:I,s:I,s:I}", "timestamp", e2b_rfc3339(now),
                  "timestampUnix", (json_int_t)now, "cpuCount", (json_int_t)cpus, "cpuUsedPct",
                  pct > 100.0 ? 100.0 : pct, "memUsed", (json_int_t)u.memory_bytes, "memTotal",
                  (json_int_t)((uint64_t)sb->rec.memory_mb << 20), "diskUsed",
                  (json_int_t)u.disk_used, "diskTotal", (json_int_t)u.disk_total);
    http_respond_json(req, 200, json_pack("[o]", m));
}

/* ---- kill, timeout, pause ---- */

static void api_kill(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (lookup(d, req, &sb) < 0)
        return;
    if (manager_destroy_by(d->mgr, sb, http_req_identity(req), http_req_id(req), "deleted", &err) <
        0) {
        e2b_fail(req, &err);
        return;
    }
    http_respond_text(req, 204, "");
}

static void api_timeout(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    long long ttl;
    if (lookup_ttl(d, req, -1, &sb, &ttl, NULL) < 0)
        return;
    if (ttl < 0) {
        e2b_failf(req, "invalid_ttl", "timeout is required");
        return;
    }
    long long at = sbx_wall_ms() / 1000 + ttl;
    int r = manager_set_expiry(d->mgr, sb, at, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.timeout",
                 sb->rec.id, r < 0 ? err.code : "ok",
                 json_pack("{s:s,s:I}", "via", "e2b", "expires_at", (json_int_t)at));
    if (r < 0)
        e2b_fail(req, &err);
    else
        http_respond_text(req, 204, "");
}

struct pause_op {
    struct sbxd *d;
    struct http_req *req;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
};

static void on_paused(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct pause_op *x = data;
    audit_record(x->d->store, &x->who, NULL, x->request_id, "sandbox.pause", sb->rec.id,
                 err ? err->code : "ok", json_pack("{s:s}", "via", "e2b"));
    if (x->req) {
        if (err)
            e2b_fail(x->req, err);
        else
            http_respond_text(x->req, 204, "");
    }
    free(x);
}

static void on_pause_gone(struct http_req *req, void *data)
{
    ((struct pause_op *)data)->req = NULL; /* the pause goes on */
}

static void api_pause(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (lookup(d, req, &sb) < 0)
        return;
    struct pause_op *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->request_id, sizeof(x->request_id), "%s", http_req_id(req));
    if (snapshot_pause(d->mgr, sb, on_paused, x, &err) < 0) {
        free(x);
        e2b_fail(req, &err);
        return;
    }
    http_req_suspend(req, on_pause_gone, x);
}

/* ---- fork (snapshot/snapcall.c, the same call as POST /v1/sandboxes/{id}/fork) ---- */

struct fork_op {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    struct snap_call *call;
    struct auth_identity who;
    char parent[STORE_ID_MAX + 1];
};

/* A copy's E2B facts: the parent's template name, and its traffic rule. */
static int fork_facts(struct sbxd *d, const char *parent, struct sandbox *kid, struct sbx_err *err)
{
    char v[STORE_NAME_MAX + 1];
    struct sbx_err e = {0};
    if (store_meta_get(d->store, parent, E2B_META_TEMPLATE, v, sizeof(v), &e) == 0 &&
        store_meta_set(d->store, kid->rec.id, E2B_META_TEMPLATE, v, err) < 0)
        return -EIO;
    bool public = store_meta_get(d->store, parent, PREVIEW_META_PUBLIC, v, sizeof(v), &e) == 0 &&
                  !strcmp(v, "1");
    return traffic_set(d, kid, public, err);
}

/* One entry per copy: {"sandbox": Sandbox} or {"error": {code, message}}, as E2B's. */
static json_t *fork_entry(struct fork_op *x, json_t *kid)
{
    struct sbx_err err = {0};
    json_t *e = json_object_get(kid, "error");
    struct sandbox *sb;
    json_t *o = NULL;
    if (e) {
        snprintf(err.code, sizeof(err.code), "%s", json_string_value(json_object_get(e, "code")) ?: "internal");
        snprintf(err.msg, sizeof(err.msg), "%s", json_string_value(json_object_get(e, "message")) ?: "");
    } else if (manager_lookup(x->d->mgr, &x->who, json_string_value(json_object_get(kid, "id")),
                              &sb, &err) == 0 &&
               fork_facts(x->d, x->parent, sb, &err) == 0) {
        o = sandbox_json(x->d, sb, &err);
    }
    if (o)
        return json_pack("{s:o}", "sandbox", o);
    unsigned status = http_status_for_code(err.code[0] ? err.code : "internal");
    return json_pack("{s:{s:i,s:s}}", "error", "code", (int)status, "message",
                     err.msg[0] ? err.msg : err.code);
}

static void on_fork_answer(json_t *answer, const struct sbx_err *err, void *data)
{
    struct fork_op *x = data;
    if (err) {
        e2b_fail(x->req, err);
    } else {
        json_t *out = json_array(), *kid;
        size_t i;
        json_array_foreach(json_object_get(answer, "data"), i, kid)
            json_array_append_new(out, fork_entry(x, kid));
        http_respond_json(x->req, 200, out);
    }
    free(x);
}

static void on_fork_gone(struct http_req *req, void *data)
{
    struct fork_op *x = data;
    snapcall_forget(x->call); /* the fork goes on, and is audited */
    free(x);
}

static void api_fork(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body;
    long long ttl;
    if (lookup_ttl(d, req, 0, &sb, &ttl, &body) < 0)
        return;
    json_t *v = json_object_get(body, "count");
    json_t *args = json_pack("{s:O?}", "count", json_is_null(v) ? NULL : v);
    if (ttl)
        json_object_set_new(args, "ttl_seconds", json_integer(ttl));
    json_decref(body);
    struct fork_op *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->parent, sizeof(x->parent), "%s", sb->rec.id);
    struct snap_origin o = {.mgr = d->mgr,
                            .jobs = d->jobs,
                            .store = d->store,
                            .who = http_req_identity(req),
                            .request_id = http_req_id(req)};
    int r = snapcall_fork(&o, sb, args, on_fork_answer, x, &x->call, &err);
    json_decref(args);
    if (r < 0) {
        free(x);
        e2b_fail(req, &err);
        return;
    }
    http_req_suspend(req, on_fork_gone, x);
}

/* PUT /sandboxes/{id}/network: the sandbox's egress policy replaced (as PUT
 * /v1/sandboxes/{id}/egress; audited sandbox.egress). */
static void api_network(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body;
    struct e2b_network net;
    if (lookup(d, req, &sb) < 0 || optional_body(req, &body) < 0)
        return;
    int r = e2b_network_parse(d, sb->rec.user, body, json_object_get(body, "allow_internet_access"),
                              sb->rec.template_name, &net, &err);
    if (r == 0 && (r = e2b_network_update(d, sb, &net, &err)) == 0)
        r = egress_replace(d, sb, http_req_identity(req), http_req_id(req), &net.egress, &err);
    e2b_network_clear(&net);
    json_decref(body);
    if (r < 0)
        e2b_fail(req, &err);
    else
        http_respond_text(req, 204, "");
}

/* For the resource files (e2b_secrets.c, ...): the same lookup and body. */
int e2b_lookup(struct sbxd *d, struct http_req *req, struct sandbox **sb)
{
    return lookup(d, req, sb);
}

int e2b_optional_body(struct http_req *req, json_t **out)
{
    return optional_body(req, out);
}

/* Parts of E2B's API sbx does not serve yet (docs/e2b.md): a clear E2B-shaped answer, so
 * the SDK says what is missing instead of "not found". */
static void api_unsupported(struct sbxd *d, struct http_req *req)
{
    if (e2b_authenticate(d, req) < 0)
        return;
    struct sbx_err err = {0};
    const char *path = http_req_path(req);
    sbx_err_set(&err, ENOSYS, "e2b_not_supported",
                "%s %.200s is not supported by this sbx server yet (see docs/e2b.md)",
                http_req_method(req), path + strlen("/e2b/api"));
    e2b_fail(req, &err);
}

/* Sandbox.deleteSnapshot and Template.delete share the route: a snapshot's id or name
 * is e2b_snapshots.c's; any other name is a template. */
static const struct route routes[] = {
    {"POST", "/e2b/api/sandboxes", AUTH_PUBLIC, api_create, 0},
    {"POST", "/e2b/api/v2/sandboxes", AUTH_PUBLIC, api_create, 0},
    {"GET", "/e2b/api/sandboxes", AUTH_PUBLIC, api_list_v1, 0},
    {"GET", "/e2b/api/v2/sandboxes", AUTH_PUBLIC, api_list, 0},
    {"GET", "/e2b/api/sandboxes/{}", AUTH_PUBLIC, api_get, 0},
    {"DELETE", "/e2b/api/sandboxes/{}", AUTH_PUBLIC, api_kill, 0},
    {"GET", "/e2b/api/sandboxes/{}/metrics", AUTH_PUBLIC, api_metrics, 0},
    {"POST", "/e2b/api/sandboxes/{}/timeout", AUTH_PUBLIC, api_timeout, 0},
    {"POST", "/e2b/api/sandboxes/{}/pause", AUTH_PUBLIC, api_pause, 0},
    {"POST", "/e2b/api/sandboxes/{}/connect", AUTH_PUBLIC, api_connect, 0},
    {"POST", "/e2b/api/sandboxes/{}/resume", AUTH_PUBLIC, api_connect, 0},
    {"POST", "/e2b/api/v2/sandboxes/{}/connect", AUTH_PUBLIC, api_connect, 0},
    {"POST", "/e2b/api/sandboxes/{}/fork", AUTH_PUBLIC, api_fork, 0},
    {"PUT", "/e2b/api/sandboxes/{}/network", AUTH_PUBLIC, api_network, 0},
    {"PATCH", "/e2b/api/volumecontent/{}/path", AUTH_PUBLIC, api_unsupported, 0},
};

const struct route_table e2b_api_routes = ROUTE_TABLE(routes);
