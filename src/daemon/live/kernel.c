#include "kernel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../auth/auth.h"
#include "../billing/billing.h"
#include "../sandbox/channel.h"
#include "../exec/exec.h"
#include "llm.h"
#include "../sandbox/manager.h"

/* The agent enforces the cell's timeout; this guards against an agent that never answers. */
#define KERNEL_GRACE_MS 15000
#define KERNEL_CTL_TIMEOUT_MS 45000 /* > the agent's KERNEL_START_TIMEOUT_MS */
#define KERNEL_MIME_MAX 128

struct kernel_run {
    struct sandbox *sb;
    struct llm *llm;
    struct chan_stream *stream;
    struct loop_timer *guard;
    const struct kernel_observer *obs;
    void *data;
    long long timeout_s;
    long long start_ms;
    struct exec_output out[2];
    char *line; /* a partial line on channel 3 */
    size_t line_len;
    json_t *done;    /* the kernel's "done" message */
    json_t *outputs; /* [{mime, data}] */
    size_t outputs_bytes;
    bool outputs_truncated;
    struct llm_call *llm_call;
    json_int_t llm_id;
    struct billing_exec billing;
};

int kernel_params_parse(json_t *body, struct kernel_params *out, struct sbx_err *err)
{
    json_t *code = json_object_get(body, "code");
    if (!json_is_string(code) || json_string_length(code) > KERNEL_CODE_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "code must be a string of at most %u bytes", KERNEL_CODE_MAX);
    struct kernel_params p = {.code = json_string_value(code), .timeout_s = KERNEL_TIMEOUT_DEFAULT};
    json_t *t = json_object_get(body, "timeout_seconds");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 1 ||
            json_integer_value(t) > KERNEL_TIMEOUT_MAX)
            return sbx_err_set(err, EINVAL, "invalid_timeout",
                               "timeout_seconds must be an integer from 1 to %d",
                               KERNEL_TIMEOUT_MAX);
        p.timeout_s = json_integer_value(t);
    }
    *out = p;
    return 0;
}

static json_t *sandbox_env(const struct sandbox *sb)
{
    json_t *senv = sandbox_env_object(sb);
    json_t *list = sandbox_env_list(senv, NULL);
    json_decref(senv);
    return list;
}

/* ---- a cell ---- */

static void run_free(struct kernel_run *run)
{
    llm_cancel(run->llm_call);
    for (int i = 0; i < 2; i++)
        free(run->out[i].buf);
    free(run->line);
    json_decref(run->done);
    json_decref(run->outputs);
    free(run);
}

static void run_finish(struct kernel_run *run, json_t *answer, const struct sbx_err *err)
{
    billing_meter_exec(&run->billing);
    if (run->guard)
        loop_timer_cancel(manager_loop(run->sb->mgr), run->guard);
    run->sb->kernel_busy = false;
    if (run->obs && run->obs->on_done)
        run->obs->on_done(answer, err, run->data);
    json_decref(answer);
    run_free(run);
}

static void reply_llm(struct kernel_run *run, json_t *reply)
{
    json_object_set_new(reply, "t", json_string("llm_reply"));
    json_object_set_new(reply, "id", json_integer(run->llm_id));
    char *line = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    size_t n = line ? strlen(line) : 0;
    if (n + 1 > KERNEL_LLM_REPLY_MAX) {
        free(line);
        reply = json_pack("{s:s,s:I,s:s}", "t", "llm_reply", "id", run->llm_id, "error",
                          "the model's answer is too large");
        line = json_dumps(reply, JSON_COMPACT);
        json_decref(reply);
        n = strlen(line);
    }
    line[n] = '\n';
    struct sbx_err e = {0};
    /* A channel that is gone ends the run by itself. */
    (void)channel_send(run->stream, PROTO_CH_STDIN, line, n + 1, &e);
    free(line);
}

static void on_llm_done(const char *text, const struct sbx_err *err, void *data)
{
    struct kernel_run *run = data;
    run->llm_call = NULL;
    reply_llm(run, text ? json_pack("{s:s}", "text", text) : json_pack("{s:s}", "error", err->msg));
}

static void handle_llm(struct kernel_run *run, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    if (!json_is_integer(id))
        return;
    if (run->llm_call)
        return; /* the kernel waits for one answer at a time; a second request is a forgery */
    run->llm_id = json_integer_value(id);
    if (!run->llm) {
        reply_llm(run, json_pack("{s:s}", "error",
                                 "llm_query is not configured: the operator has not set "
                                 "SBX_LLM_URL for sbxd"));
        return;
    }
    struct sbx_err e = {0};
    if (llm_query(run->llm, msg, on_llm_done, run, &run->llm_call, &e) < 0)
        reply_llm(run, json_pack("{s:s}", "error", e.msg));
}

static void handle_output(struct kernel_run *run, json_t *msg)
{
    json_t *mime = json_object_get(msg, "mime");
    json_t *data = json_object_get(msg, "data");
    if (!json_is_string(mime) || json_string_length(mime) > KERNEL_MIME_MAX ||
        !json_is_string(data))
        return;
    size_t n = json_string_length(mime) + json_string_length(data);
    if (run->outputs_bytes + n > KERNEL_OUTPUTS_MAX) {
        run->outputs_truncated = true;
        return;
    }
    run->outputs_bytes += n;
    json_t *o = json_pack("{s:O,s:O}", "mime", mime, "data", data);
    if (!run->outputs)
        run->outputs = json_array();
    json_array_append_new(run->outputs, o);
    if (run->obs && run->obs->on_display)
        run->obs->on_display(o, run->data);
}

/* One line from the kernel. It runs the user's code, so everything is checked. */
static void handle_line(struct kernel_run *run, const char *line, size_t len)
{
    json_t *msg = json_loadb(line, len, 0, NULL);
    const char *t = json_string_value(json_object_get(msg, "t"));
    if (!t) {
        json_decref(msg);
        return;
    }
    if (!strcmp(t, "output")) {
        handle_output(run, msg);
    } else if (!strcmp(t, "llm")) {
        handle_llm(run, msg);
    } else if (!strcmp(t, "done")) {
        json_decref(run->done);
        run->done = json_incref(msg);
    }
    json_decref(msg);
}

static void on_kernel_bytes(struct kernel_run *run, const uint8_t *buf, size_t len)
{
    while (len) {
        const uint8_t *nl = memchr(buf, '\n', len);
        size_t take = nl ? (size_t)(nl - buf) : len;
        if (run->line_len + take > KERNEL_LINE_MAX) {
            /* The agent never forwards such a line; drop it rather than grow. */
            run->line_len = 0;
        } else {
            run->line = sbx_xrealloc(run->line, run->line_len + take + 1);
            memcpy(run->line + run->line_len, buf, take);
            run->line_len += take;
        }
        if (!nl)
            return;
        handle_line(run, run->line, run->line_len);
        run->line_len = 0;
        buf += take + 1;
        len -= take + 1;
    }
}

static void on_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct kernel_run *run = data;
    if (ch == PROTO_CH_KERNEL) {
        on_kernel_bytes(run, buf, len);
        return;
    }
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR)
        return;
    struct exec_output *o = &run->out[ch - 1];
    size_t keep = len;
    if (o->len + keep > EXEC_OUTPUT_MAX)
        keep = EXEC_OUTPUT_MAX - o->len;
    if (keep) {
        o->buf = sbx_xrealloc(o->buf, o->len + keep);
        memcpy(o->buf + o->len, buf, keep);
        o->len += keep;
        if (run->obs && run->obs->on_output)
            run->obs->on_output(ch, buf, keep, run->data);
    }
    o->dropped += len - keep;
}

static json_t *synthetic_error(const char *name, const char *value)
{
    return json_pack("{s:s,s:s,s:s}", "name", name, "value", value, "traceback", "");
}

static json_t *checked(json_t *done, const char *key, bool (*ok)(const json_t *))
{
    json_t *v = json_object_get(done, key);
    return v && ok(v) ? json_incref(v) : json_null();
}

static bool is_count(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0;
}

static bool is_string(const json_t *v)
{
    return json_is_string(v);
}

static bool is_error(const json_t *v)
{
    return json_is_object(v) && json_is_string(json_object_get(v, "name")) &&
           json_is_string(json_object_get(v, "value")) &&
           json_is_string(json_object_get(v, "traceback"));
}

/* The answer: what the kernel said of the cell ("done"), or what happened to it. */
static json_t *answer_json(struct kernel_run *run, json_t *exit_payload)
{
    bool timed_out = json_is_true(json_object_get(exit_payload, "timed_out"));
    bool restarted = json_is_true(json_object_get(exit_payload, "kernel_restarted"));
    bool oom = json_is_true(json_object_get(exit_payload, "oom_killed"));
    bool pids = json_is_true(json_object_get(exit_payload, "process_limit_killed"));
    json_t *o = json_pack("{s:s}", "object", "run_code");
    exec_output_put(o, "stdout", &run->out[0]);
    exec_output_put(o, "stderr", &run->out[1]);
    json_t *done = run->done;
    json_object_set_new(o, "result", checked(done, "result", is_string));
    json_t *error = checked(done, "error", is_error);
    if (!done) {
        json_decref(error);
        char msg[256];
        if (timed_out) {
            snprintf(msg, sizeof(msg),
                     "the cell ran past its %lld s timeout: the kernel was restarted and its "
                     "state is lost",
                     run->timeout_s);
            error = synthetic_error("TimeoutError", msg);
        } else if (oom) {
            snprintf(msg, sizeof(msg),
                     "the cell used more memory than the sandbox has (%lld MiB): the kernel was "
                     "killed and restarted and its state is lost; the sandbox and its files are "
                     "intact",
                     run->sb->rec.memory_mb);
            error = synthetic_error("OutOfMemory", msg);
        } else if (pids) {
            error = synthetic_error("ProcessLimit",
                                    "the cell's processes reached the sandbox's process limit: "
                                    "the kernel was killed with them and restarted and its "
                                    "state is lost; the sandbox and its files are intact");
        } else if (json_is_true(json_object_get(exit_payload, "reset"))) {
            error = synthetic_error("KernelReset", "the kernel was reset while the cell ran");
        } else {
            json_t *st = json_object_get(exit_payload, "status");
            snprintf(msg, sizeof(msg),
                     "the kernel exited (exit code %lld): its state is lost; the next cell "
                     "starts a new one",
                     (long long)json_integer_value(json_object_get(st, "exit_code")));
            error = synthetic_error("KernelDied", msg);
        }
    }
    json_object_set_new(o, "error", error);
    json_t *d = json_object_get(done, "duration_ms");
    json_object_set_new(o, "duration_ms",
                        is_count(d) ? json_incref(d) : json_integer(sbx_now_ms() - run->start_ms));
    json_object_set_new(o, "execution_count", checked(done, "execution_count", is_count));
    json_object_set_new(o, "kernel_restarted", json_boolean(restarted));
    json_object_set_new(o, "timed_out", json_boolean(timed_out));
    json_object_set_new(o, "oom_killed", json_boolean(oom));
    if (restarted)
        json_object_set_new(o, "restart_reason",
                            json_string(timed_out ? "timed_out"
                                        : oom     ? "out_of_memory"
                                        : pids    ? "process_limit"
                                        : json_is_true(json_object_get(exit_payload, "reset"))
                                            ? "reset"
                                            : "kernel_died"));
    if (run->outputs)
        json_object_set(o, "outputs", run->outputs);
    if (run->outputs_truncated)
        json_object_set_new(o, "outputs_truncated", json_true());
    json_t *final = json_object_get(done, "final");
    if (json_is_string(final))
        json_object_set(o, "final", final);
    return o;
}

static void on_exit_frame(struct chan_stream *st, json_t *result, void *data)
{
    struct kernel_run *run = data;
    if (run->line_len)
        handle_line(run, run->line, run->line_len); /* cannot happen with a sound agent */
    run_finish(run, answer_json(run, result), NULL);
}

/* The agent's codes that mean something to the caller keep their meaning. */
static void map_error(struct sbx_err *e)
{
    if (!strcmp(e->code, "kernel_busy") || !strcmp(e->code, "kernel_unavailable") ||
        !strcmp(e->code, "process_limit"))
        return;
    if (!strcmp(e->code, "channel_closed") || !strcmp(e->code, "sandbox_not_running"))
        snprintf(e->code, sizeof(e->code), "sandbox_not_running");
    else
        snprintf(e->code, sizeof(e->code), "internal");
}

static void on_error_frame(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct kernel_run *run = data;
    struct sbx_err e = *err;
    map_error(&e);
    run_finish(run, NULL, &e);
}

static const struct chan_stream_ops run_ops = {
    .on_data = on_data,
    .on_exit = on_exit_frame,
    .on_error = on_error_frame,
};

static void on_guard(struct loop *l, void *data)
{
    struct kernel_run *run = data;
    run->guard = NULL;
    channel_detach(run->stream);
    struct sbx_err e = {0};
    sbx_err_set(&e, ETIMEDOUT, "internal", "the sandbox's agent did not answer in time");
    run_finish(run, NULL, &e);
}

static int check_running(struct sandbox *sb, struct sbx_err *err)
{
    if (!sb->chan || sb->ended)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           sb->rec.id);
    return 0;
}

int kernel_run_start(struct sandbox *sb, struct llm *llm, const struct kernel_params *p,
                     const struct kernel_observer *obs, void *data, struct kernel_run **out,
                     struct sbx_err *err)
{
    int r = check_running(sb, err);
    if (r < 0)
        return r;
    if (sb->kernel_busy)
        return sbx_err_set(err, EBUSY, "kernel_busy", "the kernel of sandbox %s is running a cell",
                           sb->rec.id);
    if (billing_admit(sb->rec.user, err) < 0)
        return sbx_err_ret(err);
    json_t *req = json_pack("{s:s,s:s,s:I,s:o}", "op", "kernel_run", "code", p->code, "timeout_ms",
                            (json_int_t)(p->timeout_s * 1000), "env", sandbox_env(sb));
    if (p->context)
        json_object_set_new(req, "context", json_string(p->context));
    if (p->language)
        json_object_set_new(req, "language", json_string(p->language));
    struct kernel_run *run = sbx_xcalloc(1, sizeof(*run));
    run->sb = sb;
    run->llm = llm;
    run->obs = obs;
    run->data = data;
    run->timeout_s = p->timeout_s;
    run->start_ms = sbx_now_ms();
    r = channel_open(sb->chan, req, &run_ops, run, &run->stream, err);
    json_decref(req);
    if (r < 0) {
        if (!strcmp(err->code, "invalid_request"))
            sbx_err_set(err, EMSGSIZE, "invalid_request",
                        "the cell is too large once encoded for the sandbox");
        run_free(run);
        return r;
    }
    run->guard =
        loop_timer_add(manager_loop(sb->mgr), p->timeout_s * 1000 + KERNEL_GRACE_MS, on_guard, run);
    sb->kernel_busy = true;
    billing_exec_begin(sb->rec.user, sb->rec.key_id, sb->rec.id, sb->rec.backend, &run->billing);
    struct auth_identity owner = {.authenticated = true};
    snprintf(owner.user, sizeof(owner.user), "%s", sb->rec.user);
    snprintf(owner.key_id, sizeof(owner.key_id), "%s", sb->rec.key_id);
    audit_record(manager_store(sb->mgr), p->who ? p->who : &owner, NULL, p->request_id,
                 "run_code", sb->rec.id, "started",
                 audit_command_details(json_pack("{s:s}", "via", p->via ? p->via : "rest"),
                                       p->code, strlen(p->code)));
    if (out)
        *out = run;
    return 0;
}

void kernel_run_abandon(struct kernel_run *run)
{
    run->obs = NULL;
    run->data = NULL;
}

/* ---- reset and interrupt ---- */

struct kernel_ctl {
    struct sandbox *sb;
    struct chan_stream *stream;
    struct loop_timer *guard;
    kernel_ctl_fn cb;
    void *data;
};

static void ctl_finish(struct kernel_ctl *c, json_t *result, const struct sbx_err *err)
{
    if (c->guard)
        loop_timer_cancel(manager_loop(c->sb->mgr), c->guard);
    if (c->cb)
        c->cb(result, err, c->data);
    free(c);
}

static void ctl_exit(struct chan_stream *st, json_t *result, void *data)
{
    ctl_finish(data, result, NULL);
}

static void ctl_error(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct sbx_err e = *err;
    map_error(&e);
    ctl_finish(data, NULL, &e);
}

static const struct chan_stream_ops ctl_ops = {.on_exit = ctl_exit, .on_error = ctl_error};

static void ctl_guard(struct loop *l, void *data)
{
    struct kernel_ctl *c = data;
    c->guard = NULL;
    channel_detach(c->stream);
    struct sbx_err e = {0};
    sbx_err_set(&e, ETIMEDOUT, "internal", "the sandbox's agent did not answer in time");
    ctl_finish(c, NULL, &e);
}

int kernel_control(struct sandbox *sb, const char *op, kernel_ctl_fn cb, void *data,
                   struct kernel_ctl **out, struct sbx_err *err)
{
    int r = check_running(sb, err);
    if (r < 0)
        return r;
    json_t *req = json_pack("{s:s,s:o}", "op", op, "env", sandbox_env(sb));
    struct kernel_ctl *c = sbx_xcalloc(1, sizeof(*c));
    c->sb = sb;
    c->cb = cb;
    c->data = data;
    r = channel_open(sb->chan, req, &ctl_ops, c, &c->stream, err);
    json_decref(req);
    if (r < 0) {
        free(c);
        return r;
    }
    c->guard = loop_timer_add(manager_loop(sb->mgr), KERNEL_CTL_TIMEOUT_MS, ctl_guard, c);
    if (out)
        *out = c;
    return 0;
}

void kernel_ctl_abandon(struct kernel_ctl *c)
{
    c->cb = NULL;
    c->data = NULL;
}
