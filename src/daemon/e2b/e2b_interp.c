/* The code interpreter's API (port 49999 of an E2B code-interpreter sandbox) on the
 * sandbox's persistent Python kernel (live/kernel.c): POST /execute streams one JSON
 * object per line (number_of_executions, stdout, stderr, result, error, keepalive, and
 * end_of_execution last), ASCII only and never a blank line, as the SDK's line reader
 * needs. The default context is "python" (the kernel's main namespace); POST /contexts makes
 * more, each a separate namespace of the same kernel (separate globals), kept in the store
 * beside the sandbox; restart resets the kernel. JavaScript and TypeScript cells (language
 * "js"/"ts", or a context made with it) run on the kernel's node process, each context in
 * a vm context of its own. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "../../common/jsonfind.h"
#include "../../common/loop.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../exec/textchunk.h"
#include "../http/server.h"
#include "../live/kernel.h"
#include "../sbxd.h"
#include "../store/store.h"
#include "e2b.h"
#include "e2b_connect.h"
#include "envd.h"

#define CONTEXT_ID "python"
#define INTERP_LINE_MAX (64u * 1024u)
#define INTERP_LINE_WAIT_MS 50
/* The contexts made by POST /contexts: [{id, language, cwd}] in the sandbox's meta. */
#define E2B_META_CONTEXTS "e2b_code_contexts"
#define CONTEXTS_MAX 16
#define CONTEXT_CWD_MAX 512
#define CONTEXTS_META_MAX (CONTEXTS_MAX * (CONTEXT_CWD_MAX + 128))

/* E2B's language names as the kernel's ("python", "js", "ts"), or NULL. */
static const char *lang_of(json_t *v)
{
    static const struct {
        const char *name, *lang;
    } map[] = {
        {"python", "python"}, {"python3", "python"}, {"js", "js"},
        {"javascript", "js"}, {"ts", "ts"},          {"typescript", "ts"},
    };
    if (!v || json_is_null(v))
        return "python";
    for (size_t i = 0; json_is_string(v) && i < SBX_ARRAY_SIZE(map); i++)
        if (!strcasecmp(json_string_value(v), map[i].name))
            return map[i].lang;
    return NULL;
}

#define LANGS_MSG "sbx's code interpreter runs python, js (javascript) and ts (typescript)"

/* The upstream server answers its errors as a bare JSON string. */
static void text_error(struct http_req *req, unsigned status, const char *msg)
{
    json_t *s = json_string(msg);
    _cleanup_free_ char *text = json_dumps(s, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    json_decref(s);
    http_respond_text(req, status, text ? text : "\"error\"");
}

static json_t *context_json(void)
{
    return json_pack("{s:s,s:s,s:s}", "id", CONTEXT_ID, "language", "python", "cwd", E2B_HOME);
}

/* The sandbox's extra contexts (a new array; empty when none). */
static json_t *contexts_load(const struct envd_ctx *c)
{
    _cleanup_free_ char *buf = sbx_xmalloc(CONTEXTS_META_MAX);
    struct sbx_err err = {0};
    json_t *a = NULL;
    if (store_meta_get(c->d->store, c->sb->rec.id, E2B_META_CONTEXTS, buf, CONTEXTS_META_MAX,
                       &err) == 0)
        a = json_loads(buf, 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        a = json_array();
    }
    return a;
}

static int contexts_save(const struct envd_ctx *c, json_t *a, struct sbx_err *err)
{
    _cleanup_free_ char *s = json_dumps(a, JSON_COMPACT);
    return store_meta_set(c->d->store, c->sb->rec.id, E2B_META_CONTEXTS, s ? s : "[]", err);
}

/* POST /contexts {language?, cwd?}: a new namespace (Python) or vm context (js, ts). */
static void context_create(const struct envd_ctx *c)
{
    json_t *body = NULL;
    struct sbx_err err = {0};
    size_t n;
    http_req_body(c->req, &n);
    if (n && http_req_json(c->req, &body, &err) < 0) {
        text_error(c->req, 400, err.msg);
        return;
    }
    const char *lang = lang_of(json_object_get(body, "language"));
    json_t *cwd = json_object_get(body, "cwd");
    if (!lang) {
        text_error(c->req, 400, LANGS_MSG);
    } else if (cwd && !json_is_null(cwd) &&
               (!json_is_string(cwd) || json_string_length(cwd) > CONTEXT_CWD_MAX)) {
        text_error(c->req, 400, "cwd must be a path");
    } else {
        json_t *all = contexts_load(c);
        if (json_array_size(all) >= CONTEXTS_MAX) {
            text_error(c->req, 429, "at most 16 code contexts per sandbox");
        } else {
            char id[40];
            sbx_random_id("ctx_", 12, id, sizeof(id));
            json_t *ctx = json_pack("{s:s,s:s,s:s}", "id", id, "language", lang, "cwd",
                                    json_is_string(cwd) ? json_string_value(cwd) : E2B_HOME);
            json_array_append(all, ctx);
            if (contexts_save(c, all, &err) < 0)
                text_error(c->req, 500, err.msg);
            else
                http_respond_json(c->req, 200, json_incref(ctx));
            json_decref(ctx);
        }
        json_decref(all);
    }
    json_decref(body);
}

/* DELETE /contexts/{id}: forgotten (its namespace goes with the kernel's next restart). */
static void context_delete(const struct envd_ctx *c, const char *id)
{
    struct sbx_err err = {0};
    json_t *all = contexts_load(c);
    json_t *ctx = sbx_json_find(all, "id", id);
    char msg[128];
    if (!strcmp(id, CONTEXT_ID)) {
        http_respond_text(c->req, 204, "");
    } else if (!ctx) {
        snprintf(msg, sizeof(msg), "Context %.64s not found", id);
        text_error(c->req, 404, msg);
    } else {
        size_t i;
        json_t *v;
        json_array_foreach(all, i, v) if (v == ctx) {
            json_array_remove(all, i);
            break;
        }
        if (contexts_save(c, all, &err) < 0)
            text_error(c->req, 500, err.msg);
        else
            http_respond_text(c->req, 204, "");
    }
    json_decref(all);
}

struct exec_req {
    struct sbxd *d;
    struct sandbox *sb;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    struct http_req *req;
    struct rpc_stream *out; /* NULL once the client went away */
    json_t *body;
    const char *lang; /* "python", "js" or "ts" (static) */
    struct kernel_run *run;
    struct utf8_carry carry[2];
    /* The unfinished line of each stream (print() writes its text and its newline
     * apart; Jupyter would send them as one message), sent at its newline, when it
     * grows past INTERP_LINE_MAX, after INTERP_LINE_WAIT_MS or at the end. */
    char *line[2];
    size_t line_len[2];
    struct loop_timer *line_timer;
};

static json_t *now_iso(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char s[48];
    size_t n = strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(s + n, sizeof(s) - n, ".%06ldZ", ts.tv_nsec / 1000);
    return json_string(s);
}

static void send_text(struct exec_req *x, int i, const uint8_t *buf, size_t len, bool flush)
{
    static const char *const types[] = {"stdout", "stderr"};
    if (!x->out)
        return;
    json_t *ev = textchunk_event(&x->carry[i], types[i], buf, len, flush);
    if (!ev)
        return;
    json_t *data = json_object_get(ev, "data");
    /* Bytes that are not UTF-8 arrive base64-encoded: the SDK's lines are text. */
    if (!json_object_get(ev, "encoding"))
        rpc_stream_send(x->out, json_pack("{s:s,s:O,s:o}", "type", types[i], "text", data,
                                          "timestamp", now_iso()));
    json_decref(ev);
}

static void flush_line(struct exec_req *x, int i)
{
    if (x->line_len[i])
        send_text(x, i, (const uint8_t *)x->line[i], x->line_len[i], false);
    x->line_len[i] = 0;
}

static void on_line_timer(struct loop *l, void *data)
{
    struct exec_req *x = data;
    x->line_timer = NULL;
    flush_line(x, 0);
    flush_line(x, 1);
}

static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct exec_req *x = data;
    if (!x->out || (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR))
        return;
    int i = ch == PROTO_CH_STDOUT ? 0 : 1;
    x->line[i] = sbx_xrealloc(x->line[i], x->line_len[i] + len);
    memcpy(x->line[i] + x->line_len[i], buf, len);
    x->line_len[i] += len;
    const char *nl = memrchr(x->line[i], '\n', x->line_len[i]);
    if (nl || x->line_len[i] > INTERP_LINE_MAX) {
        size_t n = nl ? (size_t)(nl - x->line[i]) + 1 : x->line_len[i];
        send_text(x, i, (const uint8_t *)x->line[i], n, false);
        memmove(x->line[i], x->line[i] + n, x->line_len[i] - n);
        x->line_len[i] -= n;
    }
    if (x->line_len[i] && !x->line_timer)
        x->line_timer = loop_timer_add(x->d->loop, INTERP_LINE_WAIT_MS, on_line_timer, x);
}

/* A kernel output {mime, data} as E2B's Result fields. */
static void put_mime(json_t *res, const char *mime, json_t *data)
{
    static const struct {
        const char *mime, *key;
    } map[] = {
        {"text/plain", "text"},
        {"text/html", "html"},
        {"text/markdown", "markdown"},
        {"image/svg+xml", "svg"},
        {"image/png", "png"},
        {"image/jpeg", "jpeg"},
        {"application/pdf", "pdf"},
        {"text/latex", "latex"},
        {"application/javascript", "javascript"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++) {
        if (!strcmp(mime, map[i].mime)) {
            json_object_set(res, map[i].key, data);
            return;
        }
    }
    if (!strcmp(mime, "application/json")) {
        json_t *j = json_loads(json_string_value(data) ?: "", JSON_DECODE_ANY, NULL);
        json_object_set_new(res, "json", j ? j : json_incref(data));
        return;
    }
    json_t *extra = json_object_get(res, "extra");
    if (!extra)
        json_object_set_new(res, "extra", extra = json_object());
    json_object_set(extra, mime, data);
}

static void on_display(json_t *output, void *data)
{
    struct exec_req *x = data;
    if (!x->out)
        return;
    json_t *res = json_pack("{s:s,s:b}", "type", "result", "is_main_result", 0);
    put_mime(res, json_string_value(json_object_get(output, "mime")) ?: "",
             json_object_get(output, "data"));
    rpc_stream_send(x->out, res);
}

/* Jupyter's text/plain of a str is its repr; E2B shows it without the quotes. */
static json_t *main_text(const char *repr)
{
    size_t n = strlen(repr);
    if (n >= 2 && (repr[0] == '\'' || repr[0] == '"') && repr[n - 1] == repr[0])
        return json_stringn(repr + 1, n - 2);
    return json_string(repr);
}

static void exec_free(struct exec_req *x)
{
    if (x->line_timer)
        loop_timer_cancel(x->d->loop, x->line_timer);
    free(x->line[0]);
    free(x->line[1]);
    json_decref(x->body);
    free(x);
}

static void on_done(json_t *answer, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    x->run = NULL;
    if (x->out) {
        flush_line(x, 0);
        flush_line(x, 1);
        send_text(x, 0, NULL, 0, true);
        send_text(x, 1, NULL, 0, true);
        json_t *count = json_object_get(answer, "execution_count");
        if (json_is_integer(count))
            rpc_stream_send(x->out, json_pack("{s:s,s:O}", "type", "number_of_executions",
                                              "execution_count", count));
        json_t *result = json_object_get(answer, "result");
        if (json_is_string(result))
            rpc_stream_send(x->out, json_pack("{s:s,s:o,s:b}", "type", "result", "text",
                                              strcmp(x->lang, "python")
                                                  ? json_incref(result)
                                                  : main_text(json_string_value(result)),
                                              "is_main_result", 1));
        json_t *e = json_object_get(answer, "error");
        if (err)
            rpc_stream_send(x->out, json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name",
                                              err->code, "value", err->msg, "traceback", ""));
        else if (json_is_object(e))
            rpc_stream_send(x->out, json_pack("{s:s,s:O,s:O,s:O}", "type", "error", "name",
                                              json_object_get(e, "name"), "value",
                                              json_object_get(e, "value"), "traceback",
                                              json_object_get(e, "traceback")));
        rpc_stream_send(x->out, json_pack("{s:s}", "type", "end_of_execution"));
        rpc_stream_end(x->out, NULL, NULL);
    }
    exec_free(x);
}

static const struct kernel_observer observer = {
    .on_output = on_output,
    .on_display = on_display,
    .on_done = on_done,
};

/* The client left: the cell runs on (an interrupt or reset stops it). */
static void on_gone(void *data)
{
    struct exec_req *x = data;
    x->out = NULL;
    if (x->run)
        kernel_run_abandon(x->run);
    exec_free(x);
}

/* The client left before the cell started. */
static void on_wait_gone(struct http_req *req, void *data)
{
    struct exec_req *x = data;
    sandbox_drop_waiter(x->sb, x);
    exec_free(x);
}

/* The sandbox is ready (a v1 one has a machine again): start the cell. */
static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    struct sbx_err e = {0};
    struct kernel_params p = {.code = json_string_value(json_object_get(x->body, "code")),
                              .timeout_s = KERNEL_TIMEOUT_DEFAULT,
                              .who = &x->who,
                              .request_id = x->request_id,
                              .via = "e2b"};
    /* The default context is the kernel's main namespace (for js and ts: a vm context of
     * each); any other its own. */
    const char *ctx = json_string_value(json_object_get(x->body, "context_id"));
    if (ctx && strcmp(ctx, CONTEXT_ID))
        p.context = ctx;
    if (strcmp(x->lang, "python"))
        p.language = x->lang;
    if (!err && kernel_run_start(sb, x->d->llm, &p, &observer, x, &x->run, &e) == 0) {
        x->out = rpc_stream_begin(x->req, x->d->loop, true, json_pack("{s:s}", "type", "keepalive"),
                                  on_gone, x);
        return;
    }
    err = err ? err : &e;
    text_error(x->req, !strcmp(err->code, "kernel_busy") ? 409 : 500, err->msg);
    exec_free(x);
}

/* The language of context id (python, js, ts), or NULL when it does not exist. */
static const char *context_lang(const struct envd_ctx *c, const char *id)
{
    if (!strcmp(id, CONTEXT_ID))
        return "python";
    json_t *all = contexts_load(c);
    const char *lang = lang_of(json_object_get(sbx_json_find(all, "id", id), "language"));
    if (!sbx_json_find(all, "id", id))
        lang = NULL;
    json_decref(all);
    return lang;
}

static void do_execute(const struct envd_ctx *c)
{
    struct sbx_err err = {0};
    json_t *body;
    if (http_req_json(c->req, &body, &err) < 0) {
        text_error(c->req, 400, err.msg);
        return;
    }
    json_t *code = json_object_get(body, "code");
    json_t *ctx = json_object_get(body, "context_id");
    json_t *lang = json_object_get(body, "language");
    const char *kl = json_is_string(ctx) ? context_lang(c, json_string_value(ctx)) : lang_of(lang);
    char msg[128];
    if (!json_is_string(code) || json_string_length(code) > KERNEL_CODE_MAX ||
        strlen(json_string_value(code)) != json_string_length(code)) {
        text_error(c->req, 400, "code must be a string");
    } else if (json_is_string(ctx) && json_is_string(lang)) {
        text_error(c->req, 400, "Only one of context_id or language can be provided");
    } else if (json_is_string(ctx) && !kl) {
        snprintf(msg, sizeof(msg), "Context %.64s not found", json_string_value(ctx));
        text_error(c->req, 404, msg);
    } else if (!kl) {
        text_error(c->req, 400, LANGS_MSG);
    } else {
        struct exec_req *x = sbx_xcalloc(1, sizeof(*x));
        x->d = c->d;
        x->sb = c->sb;
        x->who = c->who;
        x->req = c->req;
        x->body = body;
        x->lang = kl;
        snprintf(x->request_id, sizeof(x->request_id), "%s", http_req_id(c->req));
        /* Suspended first: the ready callback only ever runs on a later loop turn. */
        http_req_suspend(c->req, on_wait_gone, x);
        sandbox_when_ready(c->sb, on_ready, x);
        return;
    }
    json_decref(body);
}

/* kernel_reset for POST /contexts/python/restart. */
struct restart {
    struct http_req *req;
    struct kernel_ctl *ctl;
};

static void on_restarted(json_t *result, const struct sbx_err *err, void *data)
{
    struct restart *r = data;
    if (err)
        text_error(r->req, 500, err->msg);
    else
        http_respond_text(r->req, 204, "");
    free(r);
}

static void on_restart_gone(struct http_req *req, void *data)
{
    struct restart *r = data;
    kernel_ctl_abandon(r->ctl); /* the reset still happens: the client asked for it */
    free(r);
}

void envd_interp(const struct envd_ctx *c, const char *rest)
{
    const char *m = http_req_method(c->req);
    bool post = !strcmp(m, "POST");
    if (post && !strcmp(rest, "execute")) {
        do_execute(c);
    } else if (!strcmp(rest, "contexts") && !strcmp(m, "GET")) {
        json_t *all = contexts_load(c);
        json_array_insert_new(all, 0, context_json());
        http_respond_json(c->req, 200, all);
    } else if (!strcmp(rest, "contexts") && post) {
        context_create(c);
    } else if (!strncmp(rest, "contexts/", 9) && !strchr(rest + 9, '/') &&
               !strcmp(m, "DELETE")) {
        context_delete(c, rest + 9);
    } else if (!strcmp(rest, "contexts/" CONTEXT_ID "/restart") && post) {
        struct sbx_err err = {0};
        struct restart *r = sbx_xcalloc(1, sizeof(*r));
        r->req = c->req;
        if (kernel_control(c->sb, "kernel_reset", on_restarted, r, &r->ctl, &err) < 0) {
            free(r);
            text_error(c->req, 500, err.msg);
            return;
        }
        http_req_suspend(c->req, on_restart_gone, r);
    } else if (!strncmp(rest, "contexts/", 9)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "Context %.64s not found", rest + 9);
        text_error(c->req, 404, msg);
    } else {
        text_error(c->req, 404, "no such code interpreter route");
    }
}
