/* POST /v1/sandboxes/{id}/run_code, /kernel/reset and /kernel/interrupt (docs/kernel.md).
 *
 * run_code answers one JSON object when the cell ends; with Accept: text/event-stream it
 * streams data: frames instead — start, stdout/stderr chunks as the cell prints, an output
 * frame per rich output, then exactly one result (the blocking answer less the streamed
 * stdout/stderr) or error. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../exec/textchunk.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "kernel.h"

struct run_req {
    struct http_req *req; /* NULL once the client went away */
    struct sandbox *sb;
    struct llm *llm;
    json_t *body;
    struct kernel_params params;
    struct kernel_run *run;
    bool sse;
    struct utf8_carry carry[2];
};

static void run_req_free(struct run_req *x)
{
    json_decref(x->body);
    free(x);
}

static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct run_req *x = data;
    if (!x->sse || !x->req)
        return;
    const char *type = ch == PROTO_CH_STDOUT ? "stdout" : "stderr";
    json_t *ev = textchunk_event(&x->carry[ch == PROTO_CH_STDOUT ? 0 : 1], type, buf, len, false);
    if (ev)
        (void)http_sse_event(x->req, ev);
}

/* What a cut character held back at the end of a stream. */
static void flush_output(struct run_req *x)
{
    static const char *const types[] = {"stdout", "stderr"};
    for (int i = 0; i < 2; i++) {
        json_t *ev = textchunk_event(&x->carry[i], types[i], NULL, 0, true);
        if (ev)
            (void)http_sse_event(x->req, ev);
    }
}

static void on_display(json_t *output, void *data)
{
    struct run_req *x = data;
    if (!x->sse || !x->req)
        return;
    json_t *ev = json_deep_copy(output);
    json_object_set_new(ev, "type", json_string("output"));
    (void)http_sse_event(x->req, ev);
}

static void on_done(json_t *answer, const struct sbx_err *err, void *data)
{
    struct run_req *x = data;
    x->run = NULL;
    if (x->req && x->sse) {
        json_t *ev;
        flush_output(x);
        if (err) {
            ev =
                json_pack("{s:s,s:s,s:s}", "type", "error", "code", err->code, "message", err->msg);
        } else {
            /* The blocking answer without the output, which was already streamed. */
            ev = json_deep_copy(answer);
            static const char *const streamed[] = {"object", "stdout", "stderr", "stdout_encoding",
                                                   "stderr_encoding"};
            for (size_t i = 0; i < SBX_ARRAY_SIZE(streamed); i++)
                json_object_del(ev, streamed[i]);
            json_object_set_new(ev, "type", json_string("result"));
        }
        (void)http_sse_event(x->req, ev);
        http_sse_end(x->req);
    } else if (x->req) {
        if (err)
            http_respond_error(x->req, err);
        else
            http_respond_json(x->req, 200, json_incref(answer));
    }
    run_req_free(x);
}

static const struct kernel_observer observer = {
    .on_output = on_output,
    .on_display = on_display,
    .on_done = on_done,
};

static void on_abort(struct http_req *req, void *data)
{
    struct run_req *x = data;
    x->req = NULL;
    if (x->run) {
        /* The cell runs on (interrupt or reset stops it); nobody reads its answer. */
        kernel_run_abandon(x->run);
    } else {
        sandbox_drop_waiter(x->sb, x);
    }
    run_req_free(x);
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct run_req *x = data;
    struct sbx_err e = {0};
    x->params.who = http_req_identity(x->req);
    x->params.request_id = http_req_id(x->req);
    x->params.via = "rest";
    if (!err && kernel_run_start(sb, x->llm, &x->params, &observer, x, &x->run, &e) == 0) {
        if (x->sse) {
            http_sse_begin(x->req, on_abort, x);
            (void)http_sse_event(x->req,
                                 json_pack("{s:s,s:s}", "type", "start", "sandbox_id", sb->rec.id));
        }
        return;
    }
    http_respond_error(x->req, err ? err : &e);
    run_req_free(x);
}

static void api_run_code(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct run_req *x = sbx_xcalloc(1, sizeof(*x));
    if (http_req_json(req, &x->body, &err) < 0 ||
        kernel_params_parse(x->body, &x->params, &err) < 0 ||
        manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &x->sb, &err) < 0) {
        run_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    x->req = req;
    x->llm = d->llm;
    x->sse = http_req_wants_sse(req);
    http_req_suspend(req, on_abort, x);
    sandbox_when_ready(x->sb, on_ready, x);
}

/* ---- reset, interrupt ---- */

struct ctl_req {
    struct http_req *req;
    struct sandbox *sb;
    struct kernel_ctl *ctl;
    const char *op;
};

static void on_ctl_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct ctl_req *x = data;
    if (err) {
        http_respond_error(x->req, err);
    } else if (!strcmp(x->op, "kernel_reset")) {
        http_respond_json(x->req, 200,
                          json_pack("{s:s,s:s,s:b,s:O?}", "object", "kernel", "status", "ready",
                                    "restarted", 1, "start_ms",
                                    json_object_get(result, "start_ms")));
    } else {
        http_respond_json(x->req, 200,
                          json_pack("{s:s,s:b}", "object", "kernel", "interrupted",
                                    json_is_true(json_object_get(result, "interrupted"))));
    }
    free(x);
}

static void on_ctl_abort(struct http_req *req, void *data)
{
    struct ctl_req *x = data;
    if (x->ctl)
        kernel_ctl_abandon(x->ctl); /* a reset still happens: the client asked for it */
    else
        sandbox_drop_waiter(x->sb, x);
    free(x);
}

static void on_ctl_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct ctl_req *x = data;
    struct sbx_err e = {0};
    if (!err && kernel_control(sb, x->op, on_ctl_done, x, &x->ctl, &e) == 0)
        return;
    http_respond_error(x->req, err ? err : &e);
    free(x);
}

static void control(struct sbxd *d, struct http_req *req, const char *op)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 !strcmp(op, "kernel_reset") ? "kernel.reset" : "kernel.interrupt", sb->rec.id,
                 "requested", NULL);
    struct ctl_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->sb = sb;
    x->op = op;
    http_req_suspend(req, on_ctl_abort, x);
    sandbox_when_ready(sb, on_ctl_ready, x);
}

static void api_kernel_reset(struct sbxd *d, struct http_req *req)
{
    control(d, req, "kernel_reset");
}

static void api_kernel_interrupt(struct sbxd *d, struct http_req *req)
{
    control(d, req, "kernel_interrupt");
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/run_code", AUTH_SANDBOX, api_run_code, 0},
    {"POST", "/v1/sandboxes/{}/kernel/reset", AUTH_SANDBOX, api_kernel_reset, 0},
    {"POST", "/v1/sandboxes/{}/kernel/interrupt", AUTH_SANDBOX, api_kernel_interrupt, 0},
};

const struct route_table kernel_routes = ROUTE_TABLE(routes);
