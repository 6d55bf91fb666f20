#include "snapcall.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "snapshot.h"

struct snap_call {
    struct store *store;
    struct sandbox *sb; /* resume: the sandbox waited on */
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    long long t0;
    snap_answer_fn cb; /* NULL once forgotten */
    void *data;
    bool waits_ready; /* a resume: forgetting drops the sandbox waiter */
};

static struct snap_call *call_new(const struct snap_origin *o, snap_answer_fn cb, void *data)
{
    struct snap_call *x = sbx_xcalloc(1, sizeof(*x));
    x->store = o->store;
    x->who = *o->who;
    snprintf(x->request_id, sizeof(x->request_id), "%s", o->request_id ? o->request_id : "");
    x->t0 = sbx_now_ms();
    x->cb = cb;
    x->data = data;
    return x;
}

static void answer(struct snap_call *x, json_t *doc, const struct sbx_err *err)
{
    if (x->cb)
        x->cb(err ? NULL : doc, err, x->data);
    json_decref(doc);
    free(x);
}

void snapcall_forget(struct snap_call *x)
{
    if (x->waits_ready) {
        sandbox_drop_waiter(x->sb, x); /* the resume itself goes on */
        free(x);
        return;
    }
    x->cb = NULL;
}

static void on_paused(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct snap_call *x = data;
    json_t *details = json_pack("{s:I}", "ms", (json_int_t)(sbx_now_ms() - x->t0));
    if (!err)
        json_object_set_new(details, "snapshot_bytes", json_integer(sandbox_snapshot_bytes(sb)));
    audit_record(x->store, &x->who, NULL, x->request_id, "sandbox.pause", sb->rec.id,
                 err ? err->code : "ok", details);
    json_t *j = NULL;
    if (!err) {
        j = sandbox_to_json(sb);
        json_object_set_new(j, "pause_ms", json_integer(sbx_now_ms() - x->t0));
    }
    answer(x, j, err);
}

int snapcall_pause(const struct snap_origin *o, struct sandbox *sb, snap_answer_fn cb, void *data,
                   struct snap_call **out, struct sbx_err *err)
{
    struct snap_call *x = call_new(o, cb, data);
    if (snapshot_pause(o->mgr, sb, on_paused, x, err) < 0) {
        free(x);
        return sbx_err_ret(err);
    }
    *out = x;
    return 0;
}

static void on_resumed(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct snap_call *x = data;
    audit_record(x->store, &x->who, NULL, x->request_id, "sandbox.resume", sb->rec.id,
                 err ? err->code : "ok",
                 err ? NULL
                     : json_pack("{s:b,s:I}", "restored", sb->restored, "ready_ms",
                                 (json_int_t)sb->ready_ms));
    json_t *j = NULL;
    if (!err) {
        j = sandbox_to_json(sb);
        json_object_set_new(j, "restored", json_boolean(sb->restored));
        json_object_set_new(j, "ready_ms", json_integer(sb->ready_ms));
    }
    answer(x, j, err);
}

int snapcall_resume(const struct snap_origin *o, struct sandbox *sb, snap_answer_fn cb, void *data,
                    struct snap_call **out, struct sbx_err *err)
{
    struct snap_call *x = call_new(o, cb, data);
    x->sb = sb;
    x->waits_ready = true;
    /* Set first: the ready callback only ever runs on a later loop turn. */
    *out = x;
    if (snapshot_resume(o->mgr, sb, on_resumed, x, err) < 0) {
        free(x);
        *out = NULL;
        return sbx_err_ret(err);
    }
    return 0;
}

static void on_forked(const char *parent_id, const struct fork_child *kids, int n,
                      const struct sbx_err *err, void *data)
{
    struct snap_call *x = data;
    json_t *list = json_array();
    json_t *ids = json_array();
    for (int i = 0; !err && i < n; i++) {
        const struct fork_child *k = &kids[i];
        json_t *c = json_pack("{s:s?,s:b,s:I}", "id", k->id[0] ? k->id : NULL, "restored",
                              k->restored, "ready_ms", (json_int_t)k->ready_ms);
        if (!k->ok)
            json_object_set_new(c, "error",
                                json_pack("{s:s,s:s}", "code", k->err.code, "message", k->err.msg));
        else
            json_array_append_new(ids, json_string(k->id));
        json_array_append_new(list, c);
    }
    audit_record(x->store, &x->who, NULL, x->request_id, "sandbox.fork", parent_id,
                 err ? err->code : "ok",
                 json_pack("{s:i,s:o,s:I}", "count", n, "ids", ids, "ms",
                           (json_int_t)(sbx_now_ms() - x->t0)));
    answer(x,
           err ? NULL
               : json_pack("{s:s,s:s,s:O}", "object", "list", "parent_id", parent_id, "data", list),
           err);
    json_decref(list);
}

int snapcall_fork(const struct snap_origin *o, struct sandbox *sb, json_t *body, snap_answer_fn cb,
                  void *data, struct snap_call **out, struct sbx_err *err)
{
    json_t *v = json_object_get(body, "count");
    long long count = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_FORK_MAX)
            return sbx_err_set(err, EINVAL, "invalid_count",
                               "count must be an integer from 1 to %d", SANDBOX_FORK_MAX);
        count = json_integer_value(v);
    }
    long long ttl = 0;
    v = json_object_get(body, "ttl_seconds");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_TTL_MAX)
            return sbx_err_set(err, EINVAL, "invalid_ttl",
                               "ttl_seconds must be an integer from 1 to %d", SANDBOX_TTL_MAX);
        ttl = json_integer_value(v);
    }
    struct snap_call *x = call_new(o, cb, data);
    if (snapshot_fork(o->mgr, o->jobs, sb, &x->who, (int)count, ttl, on_forked, x, err) < 0) {
        free(x);
        return sbx_err_ret(err);
    }
    *out = x;
    return 0;
}
