/* POST /v1/sandboxes/{id}/exec, POST /v1/sandboxes/run and
 * GET /v1/sandboxes/{id}/execs/{exec_id}.
 *
 * With Accept: text/event-stream the answer is a stream of data: frames — one start,
 * stdout/stderr chunks as they are produced, truncated once per stream past 1 MiB, then
 * exactly one exit or error. Without it the call blocks and answers the same facts as
 * one JSON object. Either way the exec's record and its Idempotency-Key answer are
 * finished when the command ends, even if the client went away. */
#include <errno.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../billing/billing.h"
#include "../files/artifacts.h"
#include "../files/collect.h"
#include "../files/inputs.h"
#include "../http/errors.h"
#include "../http/idempotency.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "exec.h"
#include "textchunk.h"

struct exec_req {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    struct sandbox *sb;
    json_t *body;
    struct exec_params params;
    struct exec_run *run;
    struct idem_claim *claim;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    bool sse;
    bool one_shot;   /* /run: the sandbox goes when the command ends */
    bool collecting; /* /run: the result waits for the artifacts (api/artifacts.h) */
    json_t *pending_doc;
    struct inputs *inputs; /* written into the workspace before the command starts */
    struct utf8_carry carry[2];
};

static void exec_req_free(struct exec_req *x)
{
    exec_params_clear(&x->params);
    inputs_free(x->inputs);
    json_decref(x->body);
    free(x);
}

static void end_one_shot(struct exec_req *x)
{
    if (!x->one_shot || !x->sb)
        return;
    struct sbx_err err = {0};
    (void)manager_destroy_by(x->d->mgr, x->sb, &x->who, x->request_id, "run_finished", &err);
    x->sb = NULL;
}

static const char *stream_name(unsigned ch)
{
    return ch == PROTO_CH_STDOUT ? "stdout" : "stderr";
}

/* One output chunk as an event (textchunk.h). */
static void send_chunk(struct exec_req *x, unsigned ch, const uint8_t *buf, size_t len, bool flush)
{
    json_t *ev = textchunk_event(&x->carry[ch - 1], stream_name(ch), buf, len, flush);
    if (ev)
        (void)http_sse_event(x->req, ev);
}

static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct exec_req *x = data;
    if (x->sse && x->req)
        send_chunk(x, ch, buf, len, false);
}

static void on_truncated(unsigned ch, void *data)
{
    struct exec_req *x = data;
    if (x->sse && x->req)
        (void)http_sse_event(x->req, json_pack("{s:s,s:s,s:I}", "type", "truncated", "stream",
                                               stream_name(ch), "limit_bytes",
                                               (json_int_t)EXEC_OUTPUT_MAX));
}

/* The last event: the blocking answer without the output, which was already streamed.
 * A command that filled the workspace ends with an error event (workspace_too_large)
 * that still carries its exit facts. */
static json_t *exit_event(json_t *result)
{
    json_t *ev = json_deep_copy(result);
    json_object_del(ev, "stdout");
    json_object_del(ev, "stderr");
    json_object_del(ev, "stdout_encoding");
    json_object_del(ev, "stderr_encoding");
    json_object_del(ev, "object");
    json_t *error = json_object_get(ev, "error");
    if (error) {
        json_object_set_new(ev, "type", json_string("error"));
        json_object_set(ev, "code", json_object_get(error, "code"));
        json_object_set(ev, "message", json_object_get(error, "message"));
        json_object_del(ev, "error");
    } else {
        json_object_set_new(ev, "type", json_string("exit"));
    }
    return ev;
}

static json_t *error_event(const struct sbx_err *err)
{
    return json_pack("{s:s,s:s,s:s}", "type", "error", "code", err->code, "message", err->msg);
}

static void finish_done(struct exec_req *x, json_t *doc, unsigned status,
                        const struct sbx_err *err);

static void on_run_artifacts(json_t *artifacts, const struct sbx_err *aerr, void *data)
{
    struct exec_req *x = data;
    json_t *doc = TAKE_PTR(x->pending_doc);
    json_object_set_new(doc, "artifacts", artifacts ? artifacts : json_array());
    if (aerr)
        json_object_set_new(doc, "artifacts_error", json_string(aerr->msg));
    finish_done(x, doc, 200, NULL);
}

static void on_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    json_t *doc;
    unsigned status;
    if (err) {
        doc = json_pack("{s:{s:s,s:s}}", "error", "code", err->code, "message", err->msg);
        status = http_status_for_code(err->code);
    } else {
        doc = exec_result_to_json(res);
        status = 200;
    }
    if (x->one_shot && !err && x->sb) {
        x->run = NULL;
        x->collecting = true;
        x->pending_doc = doc;
        files_collect_artifacts(x->d, x->sb, on_run_artifacts, x);
        return;
    }
    finish_done(x, doc, status, err);
}

static void finish_done(struct exec_req *x, json_t *doc, unsigned status, const struct sbx_err *err)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    idem_finish(x->claim, status, text);
    x->claim = NULL;
    if (x->req) {
        if (x->sse) {
            send_chunk(x, PROTO_CH_STDOUT, NULL, 0, true);
            send_chunk(x, PROTO_CH_STDERR, NULL, 0, true);
            (void)http_sse_event(x->req, err ? error_event(err) : exit_event(doc));
            http_sse_end(x->req);
        } else {
            http_respond_text(x->req, status, text);
        }
    }
    free(text);
    json_decref(doc);
    x->run = NULL;
    end_one_shot(x);
    exec_req_free(x);
}

static const struct exec_observer observer = {
    .on_output = on_output,
    .on_truncated = on_truncated,
    .on_done = on_done,
};

static void on_abort(struct http_req *req, void *data)
{
    struct exec_req *x = data;
    x->req = NULL;
    if (x->run || x->collecting)
        return; /* the command runs on; on_done finishes its record and key */
    sandbox_drop_waiter(x->sb, x);
    idem_finish(x->claim, 0, NULL);
    end_one_shot(x);
    exec_req_free(x);
}

static void fail(struct exec_req *x, const struct sbx_err *err)
{
    char *text = NULL;
    unsigned status = http_status_for_code(err->code);
    json_t *doc = json_pack("{s:{s:s,s:s}}", "error", "code", err->code, "message", err->msg);
    billing_on_error(err->code, &x->who, json_object_get(doc, "error"));
    text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    idem_finish(x->claim, status, text);
    x->claim = NULL;
    if (x->req)
        http_respond_text(x->req, status, text);
    free(text);
    end_one_shot(x);
    exec_req_free(x);
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    struct sbx_err e = {0};
    if (err) {
        fail(x, err);
        return;
    }
    struct exec_origin origin = {
        .who = &x->who, .request_id = x->request_id, .action = x->one_shot ? "run" : "exec"};
    if (exec_start(sb, &x->params, &origin, &observer, x, &x->run, &e) < 0) {
        fail(x, &e);
        return;
    }
    if (x->sse && x->req) {
        http_sse_begin(x->req, on_abort, x);
        (void)http_sse_event(x->req, json_pack("{s:s,s:s,s:s}", "type", "start", "exec_id",
                                               exec_run_id(x->run), "sandbox_id", sb->rec.id));
    }
}

/* Inputs are written before the command starts, once every url input has arrived. */
static void write_inputs_and_go(struct exec_req *x)
{
    struct sbx_err err = {0};
    if (inputs_write(x->inputs, x->sb->workspace, &err) < 0) {
        fail(x, &err);
        return;
    }
    sandbox_when_ready(x->sb, on_ready, x);
}

static void on_inputs_fetched(const struct sbx_err *err, void *arg)
{
    struct exec_req *x = arg;
    if (err)
        fail(x, err);
    else
        write_inputs_and_go(x);
}

/* Every url input sbxd fetched (or refused) for this request: logged, and audited as the
 * caller's input.fetch on the sandbox. */
static void on_input_fetch(const struct inputs_fetch_note *n, void *arg)
{
    struct exec_req *x = arg;
    json_t *details = json_pack("{s:I,s:s,s:s,s:s,s:s,s:I,s:I}", "index", (json_int_t)n->index,
                                "path", n->path, "url", n->url, "host", n->host, "address",
                                n->addr, "bytes", (json_int_t)n->bytes, "ms", (json_int_t)n->ms);
    if (n->err) {
        json_object_set_new(details, "code", json_string(n->err->code));
        json_object_set_new(details, "message", json_string(n->err->msg));
        log_info("sandbox %s: url input %s (inputs[%zu]) not fetched: %s", x->sb->rec.id,
                 n->url, n->index, n->err->msg);
    } else {
        log_info("sandbox %s: url input %s (inputs[%zu]) fetched from %s: %zu bytes in %lld ms",
                 x->sb->rec.id, n->url, n->index, n->addr, n->bytes, n->ms);
    }
    audit_record(x->d->store, &x->who, NULL, x->request_id, "input.fetch", x->sb->rec.id,
                 n->err ? n->err->code : "ok", details);
}

static void start(struct sbxd *d, struct http_req *req, struct exec_req *x)
{
    x->d = d;
    x->req = req;
    x->sse = http_req_wants_sse(req);
    x->who = *http_req_identity(req);
    snprintf(x->request_id, sizeof(x->request_id), "%s", http_req_id(req));
    /* From here the operation owns the Idempotency-Key claim, whatever the client does. */
    x->claim = idem_take(req);
    http_req_suspend(req, on_abort, x);
    if (inputs_need_fetch(x->inputs)) {
        struct inputs_limits lim = {(size_t)d->cfg.input_url_max_bytes,
                                    d->cfg.input_url_timeout_s * 1000};
        inputs_fetch(x->inputs, d->egress, d->jobs, d->cfg.fetch_ca_file, &lim, on_input_fetch,
                     on_inputs_fetched, x);
        return;
    }
    write_inputs_and_go(x);
}

/* A replayed answer, as events when the client asked for a stream. */
static void replay(struct http_req *req, unsigned status, const char *body)
{
    json_t *doc = json_loads(body, 0, NULL);
    if (!http_req_wants_sse(req) || !doc) {
        json_decref(doc);
        http_respond_text(req, status, body);
        return;
    }
    http_sse_begin(req, NULL, NULL);
    json_t *error = json_object_get(doc, "error");
    if (error) {
        (void)http_sse_event(req, json_pack("{s:s,s:O,s:O}", "type", "error", "code",
                                            json_object_get(error, "code"), "message",
                                            json_object_get(error, "message")));
    } else {
        (void)http_sse_event(req, json_pack("{s:s,s:O,s:O}", "type", "start", "exec_id",
                                            json_object_get(doc, "id"), "sandbox_id",
                                            json_object_get(doc, "sandbox_id")));
        for (unsigned ch = PROTO_CH_STDOUT; ch <= PROTO_CH_STDERR; ch++) {
            const char *name = stream_name(ch);
            char enc_key[32];
            snprintf(enc_key, sizeof(enc_key), "%s_encoding", name);
            json_t *data = json_object_get(doc, name);
            if (!json_string_length(data))
                continue;
            json_t *ev = json_pack("{s:s,s:O}", "type", name, "data", data);
            if (json_object_get(doc, enc_key))
                json_object_set(ev, "encoding", json_object_get(doc, enc_key));
            (void)http_sse_event(req, ev);
        }
        (void)http_sse_event(req, exit_event(doc));
    }
    json_decref(doc);
    http_sse_end(req);
}

static void api_exec(struct sbxd *d, struct http_req *req)
{
    if (idem_begin(d->store, req, replay))
        return;
    struct sbx_err err = {0};
    struct exec_req *x = sbx_xcalloc(1, sizeof(*x));
    if (http_req_json(req, &x->body, &err) < 0 ||
        exec_params_parse(x->body, EXEC_TIMEOUT_MAX, &x->params, &err) < 0 ||
        inputs_parse(x->body, &x->inputs, &err) < 0 ||
        manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &x->sb, &err) < 0) {
        exec_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    if (x->sb->exec_busy) {
        sbx_err_set(&err, EBUSY, "sandbox_busy", "sandbox %s is already running a command",
                    x->sb->rec.id);
        exec_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    start(d, req, x);
}

static void api_run(struct sbxd *d, struct http_req *req)
{
    if (idem_begin(d->store, req, replay))
        return;
    struct sbx_err err = {0};
    struct exec_req *x = sbx_xcalloc(1, sizeof(*x));
    struct sandbox_params sp;
    x->one_shot = true;
    if (http_req_json(req, &x->body, &err) < 0 ||
        exec_params_parse(x->body, EXEC_TIMEOUT_MAX, &x->params, &err) < 0 ||
        sandbox_params_parse(x->body, &sp, &err) < 0 ||
        inputs_parse(x->body, &x->inputs, &err) < 0 ||
        manager_create(d->mgr, http_req_identity(req), &sp, NULL, NULL, &x->sb, &err) < 0) {
        exec_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.create",
                 x->sb->rec.id, "ok", NULL);
    start(d, req, x);
}

static void api_exec_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *o;
    if (exec_record_json(d->store, http_req_param(req, 0), http_req_param(req, 1),
                         http_req_identity(req)->user, &o, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, o);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/run", AUTH_SANDBOX, api_run, 0},
    {"POST", "/v1/sandboxes/{}/exec", AUTH_SANDBOX, api_exec, 0},
    {"GET", "/v1/sandboxes/{}/execs/{}", AUTH_SANDBOX, api_exec_get, 0},
};

const struct route_table exec_routes = ROUTE_TABLE(routes);
