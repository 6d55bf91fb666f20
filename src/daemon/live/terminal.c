#include "terminal.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/channel.h"
#include "../http/server.h"
#include "../http/ws.h"
#include "../sandbox/manager.h"

struct ticket {
    char value[TERMINAL_TICKET_LEN + 1];
    struct terminal_ticket who;
    long long expires_ms;
};

struct term_conn;

struct terminals {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct ticket tickets[TERMINAL_TICKETS_MAX];
    unsigned ntickets;
    struct term_conn *conns;
    unsigned nconns;
};

/* One connected WebSocket and its PTY's pty_attach stream. */
struct term_conn {
    struct terminals *t;
    struct sandbox *sb;     /* while st is open */
    struct chan_stream *st; /* NULL once the stream ended */
    struct ws *ws;
    char pty_id[32];
    char key_id[AUTH_KEY_ID_LEN + 1]; /* the key whose ticket opened it */
    uint64_t in_window;  /* input bytes the agent still takes */
    uint8_t *pending;    /* one client message waiting for that window */
    size_t pending_len;
    uint32_t owed;       /* output credit held back while the WebSocket is behind */
    struct loop_timer *idle_t;
    bool revoked; /* its key was deleted: closing with AUTH_REVOKED */
    long long idle_ms; /* its sandbox's configuration's limit, else the daemon's */
    struct term_conn *next, *prev;
};

int terminals_new(const struct sbxd_config *cfg, struct loop *l, struct terminals **out)
{
    struct terminals *t = sbx_xcalloc(1, sizeof(*t));
    t->cfg = cfg;
    t->loop = l;
    *out = t;
    return 0;
}

/* ---- tickets ---- */

static void tickets_purge(struct terminals *t)
{
    long long now = sbx_now_ms();
    unsigned j = 0;
    for (unsigned i = 0; i < t->ntickets; i++)
        if (t->tickets[i].expires_ms > now)
            t->tickets[j++] = t->tickets[i];
    t->ntickets = j;
}

int terminal_ticket_issue(struct terminals *t, const struct auth_identity *who,
                          const char *sandbox_id, char out[TERMINAL_TICKET_LEN + 1],
                          struct sbx_err *err)
{
    tickets_purge(t);
    if (t->ntickets >= TERMINAL_TICKETS_MAX)
        return sbx_err_set(err, ENOSPC, "too_many_tickets",
                           "too many terminal tickets are outstanding; use or let some expire");
    struct ticket *k = &t->tickets[t->ntickets++];
    memset(k, 0, sizeof(*k));
    sbx_random_id("tkt_", 32, k->value, sizeof(k->value));
    snprintf(k->who.user, sizeof(k->who.user), "%s", who->user);
    snprintf(k->who.key_id, sizeof(k->who.key_id), "%s", who->key_id);
    snprintf(k->who.sandbox_id, sizeof(k->who.sandbox_id), "%s", sandbox_id);
    k->expires_ms = sbx_now_ms() + t->cfg->ticket_ttl_ms;
    memcpy(out, k->value, sizeof(k->value));
    return 0;
}

int terminal_ticket_redeem(struct terminals *t, const char *ticket, struct terminal_ticket *out,
                           struct sbx_err *err)
{
    tickets_purge(t);
    if (strlen(ticket) == TERMINAL_TICKET_LEN) {
        for (unsigned i = 0; i < t->ntickets; i++) {
            if (CRYPTO_memcmp(t->tickets[i].value, ticket, TERMINAL_TICKET_LEN))
                continue;
            *out = t->tickets[i].who;
            t->tickets[i] = t->tickets[--t->ntickets];
            return 0;
        }
    }
    return sbx_err_set(err, EACCES, "invalid_ticket",
                       "the ticket is unknown, already used or expired; ask for a new one");
}

bool terminal_origin_allowed(const struct terminals *t, const char *origin, const char *host)
{
    if (!origin)
        return true; /* not a browser: the ticket is the whole credential */
    /* https: sbxd behind a TLS proxy that keeps the Host. */
    const char *rest = !strncmp(origin, "http://", 7)    ? origin + 7
                       : !strncmp(origin, "https://", 8) ? origin + 8
                                                         : NULL;
    if (host && rest && !strcmp(rest, host))
        return true;
    for (char **o = t->cfg->terminal_origins; *o; o++)
        if (!strcmp(*o, origin))
            return true;
    return false;
}

/* ---- the bridge ---- */

static void conn_control(struct term_conn *c, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s)
        abort();
    (void)ws_send(c->ws, true, s, strlen(s));
    free(s);
}

static void conn_error(struct term_conn *c, const char *code, uint16_t close_code)
{
    conn_control(c, json_pack("{s:s,s:s}", "type", "error", "code", code));
    ws_close(c->ws, close_code, code);
}

static void conn_idle_cb(struct loop *l, void *data)
{
    struct term_conn *c = data;
    c->idle_t = NULL;
    conn_error(c, "IDLE_DISCONNECTED", WS_CLOSE_NORMAL);
}

static void conn_touch(struct term_conn *c)
{
    if (c->idle_t)
        loop_timer_cancel(c->t->loop, c->idle_t);
    c->idle_t = loop_timer_add(c->t->loop, c->idle_ms, conn_idle_cb, c);
}

/* Send the held client message once the agent's window allows it. */
static void conn_flush_input(struct term_conn *c)
{
    if (!c->pending || !c->st || c->pending_len > c->in_window)
        return;
    struct sbx_err err = {0};
    if (channel_send(c->st, PROTO_CH_STDIN, c->pending, c->pending_len, &err) == 0)
        c->in_window -= c->pending_len;
    free(c->pending);
    c->pending = NULL;
    c->pending_len = 0;
    ws_pause_reading(c->ws, false);
}

static void st_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len,
                    void *data)
{
    struct term_conn *c = data;
    if (ch != PROTO_CH_STDOUT || !len)
        return;
    (void)ws_send(c->ws, false, buf, len);
    if (ws_queued(c->ws) > WS_QUEUE_HIGH) {
        c->owed += (uint32_t)len; /* the agent stops reading the terminal until on_drain */
        return;
    }
    (void)channel_credit(st, PROTO_CH_STDOUT, (uint32_t)len, NULL);
}

static void st_window(struct chan_stream *st, unsigned ch, uint32_t credit, void *data)
{
    struct term_conn *c = data;
    if (ch != PROTO_CH_STDIN)
        return;
    c->in_window += credit;
    conn_flush_input(c);
}

static void st_exit(struct chan_stream *st, json_t *result, void *data)
{
    struct term_conn *c = data;
    c->st = NULL;
    c->sb = NULL;
    json_t *code = json_object_get(result, "exit_code");
    if (json_is_integer(code)) {
        conn_control(c, json_pack("{s:s,s:O}", "type", "exited", "exit_code", code));
        ws_close(c->ws, WS_CLOSE_NORMAL, "exited");
    } else {
        /* Another connection took this terminal over. */
        conn_error(c, "DETACHED", WS_CLOSE_NORMAL);
    }
}

static void st_error(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct term_conn *c = data;
    c->st = NULL;
    c->sb = NULL;
    bool stopped = !strcmp(err->code, "channel_closed") || !strcmp(err->code, "sandbox_not_running");
    conn_error(c, stopped ? "SANDBOX_STOPPED" : "INTERNAL",
               stopped ? WS_CLOSE_GOING_AWAY : WS_CLOSE_INTERNAL);
}

static const struct chan_stream_ops stream_ops = {
    .on_data = st_data,
    .on_exit = st_exit,
    .on_error = st_error,
    .on_window = st_window,
};

/* Which resize an answer is for: a refused one is logged (issue 38: a resize that never
 * took effect left no trace anywhere). */
struct resize_note {
    char sandbox_id[STORE_ID_MAX + 1];
    char pty_id[32];
};

static void resize_done(json_t *result, const struct sbx_err *err, void *data)
{
    /* Nothing to answer: the shell sees the new size, or the sandbox is gone. A shell
     * that is not found while its terminal is open is worth a line too: that is how a
     * lost resize would look. */
    struct resize_note *n = data;
    if (err && strcmp(err->code, "sandbox_not_running"))
        log_warn("sandbox %s: terminal %s: the resize was refused: %s: %s", n->sandbox_id,
                 n->pty_id, err->code, err->msg);
    free(n);
}

static const struct agentcall_ops resize_ops = {.on_done = resize_done};

static void conn_text(struct term_conn *c, const uint8_t *buf, size_t len)
{
    json_t *msg = len <= TERMINAL_CONTROL_MAX
                      ? json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, NULL)
                      : NULL;
    json_t *cols = json_object_get(msg, "cols"), *rows = json_object_get(msg, "rows");
    const char *type = json_string_value(json_object_get(msg, "type"));
    bool ok = type && !strcmp(type, "resize") && json_is_integer(cols) &&
              json_is_integer(rows) && json_integer_value(cols) >= 1 &&
              json_integer_value(cols) <= 1000 && json_integer_value(rows) >= 1 &&
              json_integer_value(rows) <= 1000;
    if (ok && c->sb) {
        json_t *op = json_pack("{s:s,s:s,s:O,s:O}", "op", "pty_resize", "id", c->pty_id, "cols",
                               cols, "rows", rows);
        struct resize_note *n = sbx_xcalloc(1, sizeof(*n));
        snprintf(n->sandbox_id, sizeof(n->sandbox_id), "%s", c->sb->rec.id);
        snprintf(n->pty_id, sizeof(n->pty_id), "%s", c->pty_id);
        struct sbx_err err = {0};
        if (agentcall_start(c->sb, op, &resize_ops, n, NULL, &err) < 0) {
            log_warn("sandbox %s: terminal %s: the resize could not be sent: %s: %s",
                     n->sandbox_id, n->pty_id, err.code, err.msg);
            free(n);
        }
    } else if (!ok) {
        conn_control(c, json_pack("{s:s,s:s,s:s}", "type", "error", "code", "BAD_MESSAGE",
                                  "message",
                                  "control messages are {\"type\":\"resize\",\"cols\":1..1000,"
                                  "\"rows\":1..1000}"));
    }
    json_decref(msg);
}

static void ws_message(struct ws *w, bool text, const uint8_t *buf, size_t len, void *data)
{
    struct term_conn *c = data;
    conn_touch(c);
    if (text) {
        conn_text(c, buf, len);
        return;
    }
    if (!c->st || !len)
        return;
    c->pending = sbx_xmalloc(len);
    memcpy(c->pending, buf, len);
    c->pending_len = len;
    /* Read nothing more until this has gone to the agent. */
    ws_pause_reading(w, true);
    conn_flush_input(c);
}

static void ws_drain(struct ws *w, void *data)
{
    struct term_conn *c = data;
    if (c->owed && c->st)
        (void)channel_credit(c->st, PROTO_CH_STDOUT, c->owed, NULL);
    c->owed = 0;
}

static void conn_unlink(struct term_conn *c)
{
    struct terminals *t = c->t;
    if (c->prev)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    t->nconns--;
}

/* The client is gone: the shell stays for its grace period (the agent's). */
static void conn_detach(struct term_conn *c)
{
    if (c->st) {
        (void)channel_signal(c->st, SIGTERM, NULL);
        channel_detach(c->st);
        c->st = NULL;
    }
    if (c->idle_t)
        loop_timer_cancel(c->t->loop, c->idle_t);
    c->idle_t = NULL;
    free(c->pending);
    c->pending = NULL;
}

static void ws_closed(struct ws *w, void *data)
{
    struct term_conn *c = data;
    conn_detach(c);
    conn_unlink(c);
    free(c);
}

static const struct ws_ops ws_ops = {
    .on_message = ws_message,
    .on_drain = ws_drain,
    .on_closed = ws_closed,
};

/* A connection in t's list (so that revoking its key or stopping sbxd reaches it). */
static struct term_conn *conn_new(struct terminals *t, struct sandbox *sb, const char *pty_id,
                                  const char *key_id, struct http_upgraded *u, int fd,
                                  const char *extra, size_t extra_len)
{
    struct term_conn *c = sbx_xcalloc(1, sizeof(*c));
    c->t = t;
    snprintf(c->key_id, sizeof(c->key_id), "%s", key_id);
    snprintf(c->pty_id, sizeof(c->pty_id), "%s", pty_id ? pty_id : "");
    c->in_window = PROTO_WINDOW_INIT;
    c->idle_ms = sb && sb->terminal_idle_sec ? sb->terminal_idle_sec * t->cfg->terminal_idle_unit_ms
                                             : t->cfg->terminal_idle_ms;
    c->next = t->conns;
    if (c->next)
        c->next->prev = c;
    t->conns = c;
    t->nconns++;
    c->ws = ws_start(t->loop, u, fd, extra, extra_len, &ws_ops, c);
    conn_touch(c);
    return c;
}

void terminal_refuse(struct terminals *t, const char *code, uint16_t close_code,
                     const char *key_id, struct http_upgraded *u, int fd, const char *extra,
                     size_t extra_len)
{
    conn_error(conn_new(t, NULL, NULL, key_id, u, fd, extra, extra_len), code, close_code);
}

void terminal_bridge(struct terminals *t, struct sandbox *sb, const char *pty_id,
                     const char *key_id, struct http_upgraded *u, int fd, const char *extra,
                     size_t extra_len)
{
    struct term_conn *c = conn_new(t, sb, pty_id, key_id, u, fd, extra, extra_len);
    struct sbx_err err = {0};
    json_t *op = json_pack("{s:s,s:s}", "op", "pty_attach", "id", pty_id);
    int r = sb && sb->chan && !sb->ended
                ? channel_open(sb->chan, op, &stream_ops, c, &c->st, &err)
                : sbx_err_set(&err, ECONNRESET, "sandbox_not_running", "the sandbox stopped");
    json_decref(op);
    if (r < 0) {
        c->st = NULL;
        conn_error(c, "SANDBOX_STOPPED", WS_CLOSE_GOING_AWAY);
        return;
    }
    channel_manual_credit(c->st);
    c->sb = sb;
    conn_control(c, json_pack("{s:s,s:s,s:s,s:b}", "type", "ready", "pty_id", pty_id, "backend",
                              sb->rec.runtime, "reattachable", 1));
}

static void kill_done(json_t *result, const struct sbx_err *err, void *data)
{
    (void)result, (void)err, (void)data; /* a session that is gone already is fine */
}

void terminals_revoke(struct terminals *t, const char *key_id)
{
    unsigned j = 0;
    for (unsigned i = 0; i < t->ntickets; i++)
        if (strcmp(t->tickets[i].who.key_id, key_id))
            t->tickets[j++] = t->tickets[i];
    t->ntickets = j;
    for (struct term_conn *c = t->conns, *next; c; c = next) {
        next = c->next;
        if (strcmp(c->key_id, key_id) || c->revoked)
            continue;
        c->revoked = true;
        /* The shell ends too: nobody may re-attach to what the key opened. */
        if (c->sb && c->sb->chan && !c->sb->ended) {
            static const struct agentcall_ops kill_ops = {.on_done = kill_done};
            (void)agentcall_start(c->sb,
                                  json_pack("{s:s,s:s}", "op", "pty_kill", "id", c->pty_id),
                                  &kill_ops, NULL, NULL, NULL);
        }
        conn_error(c, "AUTH_REVOKED", WS_CLOSE_POLICY);
    }
}

void terminals_free(struct terminals *t)
{
    if (!t)
        return;
    while (t->conns) {
        struct term_conn *c = t->conns;
        conn_detach(c);
        conn_unlink(c);
        ws_abort(c->ws);
        free(c);
    }
    free(t);
}
