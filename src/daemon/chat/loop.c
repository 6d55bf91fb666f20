/* The server-side tool loop of a request with the sandbox tool: find or make the
 * conversation's sandbox, then call the model, run the sandbox tools it asks for (one at
 * a time, through tools_call: the agent tools' limits, metering and audit), give it their
 * answers, and again, at most CHAT_ROUNDS_MAX rounds; then collect the artifacts and
 * answer, as one JSON document or as events (stream.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../files/artifacts.h"
#include "../files/collect.h"
#include "../http/errors.h"
#include "../sbxd.h"
#include "../tools/tools.h"
#include "chat.h"
#include "stream.h"

enum chat_wait {
    W_NONE,
    W_TOOL,
    W_UPSTREAM,
    W_ARTIFACTS,
    W_SESSION, /* for another request of the session, which is making its sandbox */
};

struct chat {
    struct sbxd *d;
    struct http_req *req;
    const struct chat_format *f;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    json_t *body; /* the upstream request, its messages growing each round */
    struct chat_ask ask;
    char session_id[CHAT_SESSION_ID_MAX + 1];
    char sandbox_id[STORE_ID_MAX + 1];
    bool created; /* the sandbox was made for this request */
    bool stream;
    bool streaming; /* the events have begun: failures are events too */
    struct chat_sse sse;
    enum chat_wait wait;
    bool gone; /* the client went away: free once the wait is over */
    struct llm_call *up;
    struct tool_call *tool;
    json_t *answer;  /* the model's last answer */
    json_t *calls;   /* its tool calls */
    size_t next;     /* the next one to run */
    json_t *results; /* [{id, content, is_error}] for the calls */
    json_t *log;     /* [{round, name, ok}] every call of the request */
    json_t *usage;   /* the endpoint's usage summed over the request's calls, or NULL */
    int round;
    bool last;                  /* tools are off: this answer is the final one */
    bool creating;              /* making the session's sandbox: in the creating list */
    struct chat *next_creating; /* that list */
    struct chat *waiters;       /* requests of the same session waiting for it */
    struct chat *next_waiter;
    struct chat *creator; /* W_SESSION: the request we wait for */
    bool limit_reached;
};

static void chat_free(struct chat *c)
{
    if (c->streaming)
        chat_sse_stop(&c->sse);
    json_decref(c->body);
    chat_ask_clear(&c->ask);
    json_decref(c->answer);
    json_decref(c->calls);
    json_decref(c->results);
    json_decref(c->log);
    json_decref(c->usage);
    free(c);
}

/* Requests making their session's sandbox, so that a second request of the session waits
 * for it rather than making another. sbxd has one loop: a plain list. */
static struct chat *creating;

static void find_sandbox(struct chat *c);

/* c's create is over: off the list, and those waiting look again. */
static void creating_done(struct chat *c)
{
    for (struct chat **p = &creating; *p; p = &(*p)->next_creating)
        if (*p == c) {
            *p = c->next_creating;
            break;
        }
    c->creating = false;
    struct chat *w = c->waiters;
    c->waiters = NULL;
    while (w) {
        struct chat *next = w->next_waiter;
        w->creator = NULL;
        w->wait = W_NONE;
        find_sandbox(w);
        w = next;
    }
}

static void on_abort(struct http_req *req, void *data)
{
    struct chat *c = data;
    c->req = NULL;
    switch (c->wait) {
    case W_TOOL:
        tools_call_abandon(c->tool);
        if (c->creating)
            creating_done(c);
        break;
    case W_SESSION:
        for (struct chat **p = &c->creator->waiters; *p; p = &(*p)->next_waiter)
            if (*p == c) {
                *p = c->next_waiter;
                break;
            }
        break;
    case W_UPSTREAM:
        llm_cancel(c->up);
        break;
    case W_ARTIFACTS:
        c->gone = true; /* the collection's callback frees */
        return;
    case W_NONE:
        break;
    }
    chat_free(c);
}

static void audit(struct chat *c, const char *outcome)
{
    audit_record(c->d->store, &c->who, NULL, c->request_id, "chat.completion",
                 c->sandbox_id[0] ? c->sandbox_id : NULL, outcome,
                 json_pack("{s:s,s:s,s:i,s:I}", "format", c->f->name, "session_id", c->session_id,
                           "rounds", c->round, "tool_calls", (json_int_t)json_array_size(c->log)));
}

static void fail(struct chat *c, const struct sbx_err *err)
{
    audit(c, err->code);
    if (c->streaming)
        chat_sse_error(&c->sse, err);
    else
        http_respond_error(c->req, err);
    chat_free(c);
}

/* The operator's key is nobody else's business, even when an endpoint echoes it. */
static void scrub(char *s, const char *secret)
{
    size_t n = secret ? strlen(secret) : 0;
    for (char *p; n && (p = strstr(s, secret));)
        memset(p, '*', n);
}

/* ---- the end ---- */

/* "\n\n**Files**\n- [out/a.pdf](https://...)" for the artifacts with a link. */
static char *markdown(json_t *artifacts)
{
    char *s = sbx_xstrdup("");
    size_t i;
    json_t *a;
    json_array_foreach(artifacts, i, a)
    {
        const char *path = json_string_value(json_object_get(a, "path"));
        const char *url = json_string_value(json_object_get(a, "url"));
        if (!path || !url)
            continue;
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char *n = sbx_xasprintf("%s%s- [%s](%s)", s, s[0] ? "\n" : "\n\n**Files**\n", name, url);
        free(s);
        s = n;
    }
    return s;
}

/* Every round is billed by the endpoint: the answer's usage is all of theirs. */
static void add_usage(struct chat *c, json_t *usage)
{
    const char *k;
    json_t *v;
    if (!json_is_object(usage))
        return;
    if (!c->usage)
        c->usage = json_object();
    json_object_foreach(usage, k, v)
    {
        if (json_is_integer(v))
            json_object_set_new(c->usage, k,
                                json_integer(json_integer_value(json_object_get(c->usage, k)) +
                                             json_integer_value(v)));
    }
}

static void on_artifacts(json_t *artifacts, const struct sbx_err *aerr, void *data)
{
    struct chat *c = data;
    c->wait = W_NONE;
    if (c->gone) {
        json_decref(artifacts);
        chat_free(c);
        return;
    }
    if (!artifacts)
        artifacts = json_array();
    json_t *sbx = json_pack("{s:s,s:s,s:b,s:i,s:b,s:O,s:o}", "session_id", c->session_id,
                            "sandbox_id", c->sandbox_id, "sandbox_created", c->created, "rounds",
                            c->round, "round_limit_reached", c->limit_reached, "tool_calls", c->log,
                            "artifacts", artifacts);
    if (aerr)
        json_object_set_new(sbx, "artifacts_error", json_string(aerr->msg));
    _cleanup_free_ char *md = markdown(artifacts);
    audit(c, "ok");
    if (c->stream) {
        _cleanup_free_ char *t = c->f->text(c->answer);
        chat_sse_text(&c->sse, t);
        chat_sse_text(&c->sse, md);
        size_t i;
        json_t *call;
        json_array_foreach(c->calls, i, call) /* the client's own tools, for it to run */
        {
            chat_sse_tool_use(&c->sse, i, call);
        }
        chat_sse_end(&c->sse, c->f->stop_reason(c->answer), c->usage, sbx);
    } else {
        c->f->finish(c->answer, md, sbx);
        if (c->usage)
            json_object_set(c->answer, "usage", c->usage);
        http_respond_json(c->req, 200, json_incref(c->answer));
    }
    json_decref(sbx);
    chat_free(c);
}

static void finish(struct chat *c)
{
    struct sandbox *sb;
    struct sbx_err err = {0};
    if (manager_lookup(c->d->mgr, &c->who, c->sandbox_id, &sb, &err) < 0) {
        on_artifacts(NULL, &err, c);
        return;
    }
    c->wait = W_ARTIFACTS;
    files_collect_artifacts(c->d, sb, on_artifacts, c);
}

/* ---- the model ---- */

static void call_model(struct chat *c);
static void run_next(struct chat *c);

static void on_model(long status, const char *ctype, const char *body, size_t len,
                     const struct sbx_err *err, void *data)
{
    struct chat *c = data;
    struct sbx_err e = {0};
    c->up = NULL;
    c->wait = W_NONE;
    if (err) {
        fail(c, err);
        return;
    }
    json_t *answer = json_loadb(body ?: "", len, 0, NULL);
    if (status != 200 || !json_is_object(answer)) {
        /* What it said, cut where a character ends (the error is JSON, and UTF-8). */
        size_t n =
            sbx_utf8_prefix(body ?: "", len < CHAT_UPSTREAM_SNIPPET ? len : CHAT_UPSTREAM_SNIPPET);
        bool text = sbx_utf8_valid(body ?: "", n);
        if (text)
            sbx_err_set(&e, EIO, "upstream_error", "the model endpoint answered HTTP %ld: %.*s",
                        status, (int)n, body ?: "");
        else
            sbx_err_set(&e, EIO, "upstream_error",
                        "the model endpoint answered HTTP %ld, with a body that is not UTF-8 text",
                        status);
        scrub(e.msg, c->d->cfg.llm_api_key);
        scrub(e.msg, c->d->cfg.llm_anthropic_api_key);
        json_decref(answer);
        fail(c, &e);
        return;
    }
    json_decref(c->answer);
    c->answer = answer;
    add_usage(c, json_object_get(answer, "usage"));
    json_decref(c->calls);
    c->calls = c->f->calls(answer);
    size_t i;
    json_t *call;
    bool foreign = false; /* a tool of the client's own: the client runs it */
    json_array_foreach(c->calls, i, call)
    {
        foreign |= !chat_tool_known(json_string_value(json_object_get(call, "name")));
    }
    if (json_array_size(c->calls) == 0 || foreign) {
        finish(c);
        return;
    }
    if (c->last) { /* tools were off and it still asked: nobody will run those */
        c->f->strip_calls(answer);
        json_decref(c->calls);
        c->calls = json_array();
        finish(c);
        return;
    }
    if (c->stream) {
        _cleanup_free_ char *t = c->f->text(answer);
        chat_sse_text(&c->sse, t);
    }
    json_decref(c->results);
    c->results = json_array();
    c->next = 0;
    c->round++;
    run_next(c);
}

static const struct llm_raw_ops model_ops = {.on_done = on_model};

static void call_model(struct chat *c)
{
    struct sbx_err err = {0};
    _cleanup_free_ char *text = json_dumps(c->body, JSON_COMPACT);
    char *headers[CHAT_FORWARD_HEADERS_MAX + 1];
    if (!text) {
        sbx_err_set(&err, ENOMEM, "internal", "encoding the model request");
        fail(c, &err);
        return;
    }
    chat_forward_headers(c->req, c->f, headers);
    int r = llm_post(c->d->llm, c->f->api, text, strlen(text), (const char *const *)headers,
                     &model_ops, c, &c->up, &err);
    chat_forward_headers_free(headers);
    if (r < 0) {
        fail(c, &err);
        return;
    }
    c->wait = W_UPSTREAM;
}

/* ---- the tools ---- */

static void add_result(struct chat *c, json_t *call, char *content, bool is_error)
{
    json_array_append_new(c->results, json_pack("{s:O,s:s,s:b}", "id", json_object_get(call, "id"),
                                                "content", content, "is_error", is_error));
    json_array_append_new(c->log, json_pack("{s:i,s:O,s:b}", "round", c->round, "name",
                                            json_object_get(call, "name"), "ok", !is_error));
    free(content);
}

static char *error_text(const char *code, const char *msg, json_t *details)
{
    json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (details)
        json_object_update(e, details);
    json_t *doc = json_pack("{s:o}", "error", e);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return s ? s : sbx_xstrdup("{\"error\":{}}");
}

static void on_tool(json_t *result, const struct sbx_err *err, json_t *details, void *data)
{
    struct chat *c = data;
    c->tool = NULL;
    c->wait = W_NONE;
    json_t *call = json_array_get(c->calls, c->next);
    const char *name = json_string_value(json_object_get(call, "name"));
    char *content =
        err ? error_text(err->code, err->msg, details) : chat_tool_result_text(name, result);
    if (c->stream) {
        json_t *ev =
            json_pack("{s:i,s:s,s:s,s:b}", "round", c->round, "id",
                      json_string_value(json_object_get(call, "id")), "name", name, "ok", !err);
        if (err)
            json_object_set_new(ev, "error",
                                json_pack("{s:s,s:s}", "code", err->code, "message", err->msg));
        else if (json_object_get(result, "exit_code"))
            json_object_set(ev, "exit_code", json_object_get(result, "exit_code"));
        chat_sse_progress(&c->sse, "tool_result", ev);
    }
    add_result(c, call, content, err != NULL);
    c->next++;
    run_next(c);
}

static void run_next(struct chat *c)
{
    while (c->next < json_array_size(c->calls)) {
        json_t *call = json_array_get(c->calls, c->next);
        const char *name = json_string_value(json_object_get(call, "name"));
        json_t *args = json_object_get(call, "args");
        if (c->stream)
            chat_sse_progress(&c->sse, "tool_call",
                              json_pack("{s:i,s:O,s:s,s:O?}", "round", c->round, "id",
                                        json_object_get(call, "id"), "name", name, "arguments",
                                        args));
        if (!args) { /* the model's arguments were not JSON: it hears why, and may retry */
            const char *why = json_string_value(json_object_get(call, "args_error"));
            if (c->stream)
                chat_sse_progress(&c->sse, "tool_result",
                                  json_pack("{s:i,s:O,s:s,s:b,s:{s:s,s:s}}", "round", c->round,
                                            "id", json_object_get(call, "id"), "name", name, "ok",
                                            0, "error", "code", "invalid_tool_arguments", "message",
                                            why));
            add_result(c, call, error_text("invalid_tool_arguments", why, NULL), true);
            c->next++;
            continue;
        }
        json_t *impl_args = NULL;
        const char *impl = chat_tool_impl(name, args, c->sandbox_id, &impl_args);
        struct tool_request rq = {.who = &c->who,
                                  .request_id = c->request_id,
                                  .name = impl,
                                  .args = impl_args,
                                  .sandbox_id = c->sandbox_id};
        c->wait = W_TOOL;
        tools_call(c->d, &rq, on_tool, c, &c->tool);
        json_decref(impl_args);
        return; /* on_tool goes on, maybe already */
    }
    c->f->append(c->body, c->answer, c->results);
    if (c->round >= CHAT_ROUNDS_MAX) { /* one more answer, without tools */
        c->limit_reached = true;
        c->last = true;
        c->f->tools_off(c->body);
    }
    call_model(c);
}

/* ---- the conversation's sandbox ---- */

static void begin(struct chat *c)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(c->d->mgr, &c->who, c->sandbox_id, &sb, &err) < 0 ||
        chat_skills_install(c->d->skills, c->ask.skills, sb->workspace, &err) < 0) {
        fail(c, &err);
        return;
    }
    if (c->stream) {
        chat_sse_begin(&c->sse, c->req, c->f, json_string_value(json_object_get(c->body, "model")),
                       c->d->loop, c->d->cfg.chat_keepalive_ms, on_abort, c);
        c->streaming = true;
    }
    call_model(c);
}

static void on_created(json_t *result, const struct sbx_err *err, json_t *details, void *data)
{
    struct chat *c = data;
    struct sbx_err e = {0};
    c->tool = NULL;
    c->wait = W_NONE;
    if (!err) {
        snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s",
                 json_string_value(json_object_get(result, "id")) ?: "");
        c->created = true;
        if (store_chat_session_set(c->d->store, c->who.user, c->session_id, c->sandbox_id,
                                   time(NULL), &e) < 0)
            err = &e;
    }
    creating_done(c); /* the mapping is stored: the waiters find it */
    if (err) {
        fail(c, err);
        return;
    }
    begin(c);
}

/* The session's sandbox, its life extended; else a new one (or the one another request of
 * the session is making). */
static void find_sandbox(struct chat *c)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    char id[STORE_ID_MAX + 1];
    if (store_chat_session_get(c->d->store, c->who.user, c->session_id, id, &err) == 0 &&
        manager_lookup(c->d->mgr, &c->who, id, &sb, &err) == 0 && !sb->ended) {
        long long until = (long long)time(NULL) + CHAT_SANDBOX_TTL;
        snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", id);
        if (sb->rec.expires_at < until && manager_set_expiry(c->d->mgr, sb, until, &err) < 0) {
            fail(c, &err);
            return;
        }
        begin(c);
        return;
    }
    for (struct chat *x = creating; x; x = x->next_creating)
        if (!strcmp(x->who.user, c->who.user) && !strcmp(x->session_id, c->session_id)) {
            c->creator = x;
            c->next_waiter = x->waiters;
            x->waiters = c;
            c->wait = W_SESSION;
            return;
        }
    c->creating = true;
    c->next_creating = creating;
    creating = c;
    json_t *args = json_pack("{s:i}", "ttl_seconds", CHAT_SANDBOX_TTL);
    const char *keys[] = {"template", "egress"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(keys); i++)
        if (json_object_get(c->ask.tool, keys[i]))
            json_object_set(args, keys[i], json_object_get(c->ask.tool, keys[i]));
    struct tool_request rq = {
        .who = &c->who, .request_id = c->request_id, .name = "sandbox_create", .args = args};
    c->wait = W_TOOL;
    tools_call(c->d, &rq, on_created, c, &c->tool);
    json_decref(args);
}

static bool session_id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > CHAT_SESSION_ID_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", *p))
            return false;
    return true;
}

void chat_loop_start(struct sbxd *d, struct http_req *req, const struct chat_format *f,
                     json_t *body, struct chat_ask *ask)
{
    const char *sid = http_req_header(req, CHAT_SESSION_HEADER);
    if (sid && !session_id_valid(sid)) {
        json_decref(body);
        chat_ask_clear(ask);
        http_respond_errorf(req, "invalid_session_id",
                            CHAT_SESSION_HEADER " must be 1-%d of [A-Za-z0-9_.:-]",
                            CHAT_SESSION_ID_MAX);
        return;
    }
    struct chat *c = sbx_xcalloc(1, sizeof(*c));
    c->d = d;
    c->req = req;
    c->f = f;
    c->who = *http_req_identity(req);
    snprintf(c->request_id, sizeof(c->request_id), "%s", http_req_id(req));
    c->body = body;
    c->ask = *ask;
    c->stream = ask->stream;
    c->log = json_array();
    if (sid) {
        snprintf(c->session_id, sizeof(c->session_id), "%s", sid);
    } else { /* a conversation of its own, which the client can go on with */
        sbx_random_id("chat_", 12, c->session_id, sizeof(c->session_id));
    }
    http_req_add_header(req, CHAT_SESSION_HEADER, c->session_id);
    _cleanup_free_ char *instructions = chat_instructions(d->skills, ask->skills);
    f->prepare(body, instructions, llm_default_model(d->llm));
    chat_tools_for_skills(body, ask->skills, f->api);
    http_req_suspend(req, on_abort, c);
    find_sandbox(c);
}
