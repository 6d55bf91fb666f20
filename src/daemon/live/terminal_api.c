/* Session terminals (docs/terminals.md):
 *   POST /v1/sandboxes/{id}/terminal-ticket   -> {ticket, expires_in}
 *   GET  /v1/sandboxes/{id}/terminal?ticket=&cols=&rows=&pty_id=&provision=   WebSocket
 * The WebSocket route takes no key: the single-use ticket is its credential. Bad requests
 * are answered as plain HTTP before the upgrade; a sandbox that cannot open a terminal
 * now (paused, stopped, a backend without one) with spec 002's error frame after it;
 * provision=1 wakes a paused or stopped one first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../http/ws.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/runas.h"
#include "../sbxd.h"
#include "../snapshot/snapcall.h"
#include "terminal.h"

#define TERMINAL_PTY_ID_MAX 31
#define TERMINAL_SHELL "/bin/bash -l"

static void api_terminal_ticket(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    char ticket[TERMINAL_TICKET_LEN + 1];
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        terminal_ticket_issue(d->terminals, http_req_identity(req), sb->rec.id, ticket, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "terminal.ticket",
                 sb->rec.id, "ok", NULL);
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:I}", "object", "terminal_ticket", "ticket", ticket,
                                "expires_in", (json_int_t)(d->cfg.ticket_ttl_ms + 999) / 1000));
}

struct term_req {
    struct sbxd *d;
    struct http_req *req;
    struct agentcall *call;
    struct snap_call *resume; /* provision=1 on a paused sandbox, until it is up */
    json_t *op;               /* the PTY op to send once it is */
    struct auth_identity who;
    char sandbox_id[STORE_ID_MAX + 1];
    char pty_id[TERMINAL_PTY_ID_MAX + 1];
    bool reattach;
    bool restarting;    /* provision=1 on a stopped sandbox: audited as sandbox.restart */
    const char *refuse; /* the error frame to answer after the upgrade, or NULL */
};

static void term_req_free(struct term_req *x)
{
    json_decref(x->op);
    free(x);
}

static void on_req_abort(struct http_req *req, void *data)
{
    struct term_req *x = data;
    if (x->call)
        agentcall_cancel(x->call, false);
    if (x->resume)
        snapcall_forget(x->resume); /* the resume goes on without us */
    term_req_free(x);
}

static void on_upgraded(struct http_upgraded *u, int fd, const char *extra, size_t extra_len,
                        void *data)
{
    struct term_req *x = data;
    struct sandbox *sb = NULL;
    if (x->refuse) {
        terminal_refuse(x->d->terminals, x->refuse,
                        strcmp(x->refuse, "TERMINAL_UNSUPPORTED") ? WS_CLOSE_GOING_AWAY
                                                                  : WS_CLOSE_NORMAL,
                        x->who.key_id, u, fd, extra, extra_len);
        term_req_free(x);
        return;
    }
    /* Looked up again: the sandbox may have ended while the 101 was on its way. */
    (void)manager_lookup(x->d->mgr, &x->who, x->sandbox_id, &sb, NULL);
    terminal_bridge(x->d->terminals, sb, x->pty_id, x->who.key_id, u, fd, extra, extra_len);
    term_req_free(x);
}

static void on_upgrade_abort(struct http_req *req, void *data)
{
    term_req_free(data); /* the shell stays for its grace period */
}

/* Upgrade, then answer the error frame code (spec 002: after the upgrade). */
static void refuse_after_upgrade(struct term_req *x, const char *code)
{
    x->refuse = code;
    audit_record(x->d->store, &x->who, NULL, http_req_id(x->req), "terminal.open", x->sandbox_id,
                 code, x->pty_id[0] ? json_pack("{s:s}", "pty_id", x->pty_id) : NULL);
    ws_handshake_accept(x->req);
    http_respond_upgrade(x->req, on_upgraded, on_upgrade_abort, x);
}

/* Why sb cannot run a terminal right now without provision=1, or NULL. */
static const char *not_running(const struct sandbox *sb)
{
    if (sb->paused && !sb->restoring)
        return "SANDBOX_PAUSED";
    if (sb->failed)
        return "SANDBOX_STOPPED";
    return NULL;
}

static void on_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct term_req *x = data;
    x->call = NULL;
    struct sandbox *sb = NULL;
    if (x->restarting)
        audit_record(x->d->store, &x->who, NULL, http_req_id(x->req), "sandbox.restart",
                     x->sandbox_id, err ? err->code : "ok",
                     json_pack("{s:s}", "by", "terminal provision"));
    /* Paused or stopped while we waited for it (a pause under way, a machine lost); a
     * refused provision=1 restart says why instead. */
    if (err && !x->restarting &&
        manager_lookup(x->d->mgr, &x->who, x->sandbox_id, &sb, NULL) == 0 && not_running(sb)) {
        refuse_after_upgrade(x, not_running(sb));
        return;
    }
    if (err) {
        http_respond_error(x->req, err);
        term_req_free(x);
        return;
    }
    snprintf(x->pty_id, sizeof(x->pty_id), "%s", json_string_value(json_object_get(result, "id")));
    /* The terminal's shell is what runs: written before the first keystroke can reach it. */
    json_t *details = json_pack("{s:s,s:b}", "pty_id", x->pty_id, "reattach", x->reattach);
    if (!x->reattach)
        details = audit_command_details(details, TERMINAL_SHELL, strlen(TERMINAL_SHELL));
    audit_record(x->d->store, &x->who, NULL, http_req_id(x->req), "terminal.open", x->sandbox_id,
                 "ok", details);
    ws_handshake_accept(x->req);
    http_respond_upgrade(x->req, on_upgraded, on_upgrade_abort, x);
}

static const struct agentcall_ops call_ops = {.on_done = on_done};

static void start_pty(struct term_req *x, struct sandbox *sb)
{
    struct sbx_err err = {0};
    json_t *op = x->op;
    x->op = NULL;
    if (agentcall_start(sb, op, &call_ops, x, &x->call, &err) < 0) {
        http_respond_error(x->req, &err);
        term_req_free(x);
    }
}

/* provision=1: the paused sandbox is up again (sandbox.resume is audited by snapcall). */
static void on_resumed(json_t *answer, const struct sbx_err *err, void *data)
{
    struct term_req *x = data;
    struct sandbox *sb = NULL;
    struct sbx_err lerr = {0};
    x->resume = NULL;
    if (!err && manager_lookup(x->d->mgr, &x->who, x->sandbox_id, &sb, &lerr) < 0)
        err = &lerr;
    if (err) {
        http_respond_error(x->req, err);
        term_req_free(x);
        return;
    }
    start_pty(x, sb);
}

/* cols/rows from the query: absent, or an integer in 1..1000. */
static int dim_query(struct http_req *req, const char *name, json_t *op, struct sbx_err *err)
{
    if (!http_req_query(req, name))
        return 0;
    long long n;
    int r = http_req_query_int(req, name, 1, 1000, "invalid_pty_size", &n, err);
    if (r < 0)
        return r;
    json_object_set_new(op, name, json_integer(n));
    return 0;
}

static void api_terminal_connect(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct term_req *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    json_t *op = json_object();
    struct terminal_ticket tk;
    struct store_key key;
    struct sandbox *sb;
    const char *ticket = http_req_query(req, "ticket");
    const char *pty_id = http_req_query(req, "pty_id");
    if (!terminal_origin_allowed(d->terminals, http_req_header(req, "Origin"),
                                 http_req_header(req, "Host"))) {
        sbx_err_set(&err, EACCES, "origin_not_allowed",
                    "this Origin is not allowed to open terminals (SBX_TERMINAL_ORIGINS)");
        goto fail;
    }
    if (ws_handshake_check(req, &err) < 0 || dim_query(req, "cols", op, &err) < 0 ||
        dim_query(req, "rows", op, &err) < 0)
        goto fail;
    const char *provision = http_req_query(req, "provision");
    if (provision && strcmp(provision, "0") && strcmp(provision, "1")) {
        sbx_err_set(&err, EINVAL, "invalid_request", "provision must be 0 or 1");
        goto fail;
    }
    if (pty_id) {
        size_t n = strlen(pty_id);
        bool ok = n > 0 && n <= TERMINAL_PTY_ID_MAX;
        for (const char *c = pty_id; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!ok) {
            sbx_err_set(&err, ENOENT, "pty_not_found", "no terminal %.64s", pty_id);
            goto fail;
        }
    }
    if (!ticket || !*ticket) {
        sbx_err_set(&err, EACCES, "missing_ticket",
                    "send ?ticket= from POST /v1/sandboxes/{id}/terminal-ticket");
        goto fail;
    }
    if (terminal_ticket_redeem(d->terminals, ticket, &tk, &err) < 0)
        goto fail;
    if (strcmp(tk.sandbox_id, http_req_param(req, 0))) {
        sbx_err_set(&err, EPERM, "ticket_forbidden", "this ticket is for another sandbox");
        goto fail;
    }
    /* The key that asked for the ticket must still exist. */
    if (store_key_get(d->store, tk.key_id, &key, NULL) < 0) {
        sbx_err_set(&err, EACCES, "invalid_ticket", "the key this ticket was issued to is gone");
        goto fail;
    }
    x->who.authenticated = true;
    snprintf(x->who.user, sizeof(x->who.user), "%s", tk.user);
    snprintf(x->who.key_id, sizeof(x->who.key_id), "%s", tk.key_id);
    if (manager_lookup(d->mgr, &x->who, tk.sandbox_id, &sb, &err) < 0)
        goto fail;
    snprintf(x->sandbox_id, sizeof(x->sandbox_id), "%s", sb->rec.id);
    if (pty_id) {
        /* Re-attach: the resize doubles as "does it still exist". */
        snprintf(x->pty_id, sizeof(x->pty_id), "%s", pty_id);
        json_object_set_new(op, "op", json_string("pty_resize"));
        json_object_set_new(op, "id", json_string(pty_id));
        x->reattach = true;
    } else {
        json_object_set_new(op, "op", json_string("pty_open"));
        json_object_set_new(op, "kind", json_string("terminal"));
        json_object_set_new(op, "argv", json_pack("[s,s]", "/bin/bash", "-l"));
        json_object_set_new(op, "grace_ms", json_integer(d->cfg.terminal_grace_s * 1000));
        const char *q = http_req_query(req, "user"), *user;
        json_t *u = q ? json_string_nocheck(q) : NULL;
        int r = runas_parse(u, &user, &err);
        json_decref(u);
        if (r < 0 || runas_check(sb, user, &err) < 0)
            goto fail;
        runas_put(op, user);
    }
    x->op = op;
    op = NULL;
    if (!sandbox_keeps_ptys(sb)) {
        refuse_after_upgrade(x, "TERMINAL_UNSUPPORTED");
        return;
    }
    bool wake = provision && !strcmp(provision, "1");
    if (not_running(sb) && !wake) {
        refuse_after_upgrade(x, not_running(sb));
        return;
    }
    http_req_suspend(req, on_req_abort, x);
    if (wake && sb->paused && !sb->restoring) {
        /* The same audited, billed resume as POST /v1/sandboxes/{id}/resume. */
        struct snap_origin o = {
            .mgr = d->mgr, .store = d->store, .who = &x->who, .request_id = http_req_id(req)};
        if (snapcall_resume(&o, sb, on_resumed, x, &x->resume, &err) < 0) {
            http_respond_error(req, &err);
            term_req_free(x);
        }
        return;
    }
    /* A stopped one: the PTY op's wait for it starts it again, as an exec's would. */
    x->restarting = wake && sb->failed;
    start_pty(x, sb);
    return;
fail:
    json_decref(op);
    term_req_free(x);
    /* A browser shows a refused WebSocket only as close code 1006: the reason is in the
     * JSON answer for other clients, and here for the operator. */
    log_warn("terminal %s refused (%s, Origin %s): %s: %s", http_req_param(req, 0),
             http_req_id(req),
             http_req_header(req, "Origin") ? http_req_header(req, "Origin") : "none", err.code,
             err.msg);
    http_respond_error(req, &err);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/terminal-ticket", AUTH_SANDBOX, api_terminal_ticket, 0},
    /* A WebSocket: the single-use ticket in the query is the credential. */
    {"GET", "/v1/sandboxes/{}/terminal", AUTH_PUBLIC, api_terminal_connect, 0},
};

const struct route_table terminal_routes = ROUTE_TABLE(routes);
