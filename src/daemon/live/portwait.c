#include "portwait.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../sandbox/channel.h"

struct portwait {
    struct manager *m;
    struct auth_identity who;
    char sandbox_id[STORE_ID_MAX + 1];
    unsigned port;
    long long deadline;
    struct chan_stream *st;
    struct loop_timer *timer;
    portwait_fn cb;
    void *data;
};

static void finish(struct portwait *pw, const struct sbx_err *err)
{
    if (pw->timer)
        loop_timer_cancel(manager_loop(pw->m), pw->timer);
    if (pw->st)
        channel_detach(pw->st);
    pw->cb(err, pw->data);
    free(pw);
}

static void try_connect(struct loop *l, void *data);

static void retry_or_give_up(struct portwait *pw)
{
    if (sbx_now_ms() + PORTWAIT_RETRY_MS > pw->deadline) {
        struct sbx_err err = {0};
        sbx_err_set(&err, ETIMEDOUT, "preview_port_timeout",
                    "nothing accepted connections on port %u of sandbox %s in time (it must "
                    "listen on 127.0.0.1 or 0.0.0.0 inside the sandbox)",
                    pw->port, pw->sandbox_id);
        finish(pw, &err);
        return;
    }
    pw->timer = loop_timer_add(manager_loop(pw->m), PORTWAIT_RETRY_MS, try_connect, pw);
}

static void on_exit_(struct chan_stream *st, json_t *result, void *data)
{
    struct portwait *pw = data;
    pw->st = NULL;
    finish(pw, NULL);
}

static void on_error(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct portwait *pw = data;
    pw->st = NULL;
    if (strcmp(err->code, "connect_failed")) {
        finish(pw, err);
        return;
    }
    retry_or_give_up(pw);
}

static const struct chan_stream_ops probe_ops = {.on_exit = on_exit_, .on_error = on_error};

static void try_connect(struct loop *l, void *data)
{
    struct portwait *pw = data;
    pw->timer = NULL;
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(pw->m, &pw->who, pw->sandbox_id, &sb, &err) < 0) {
        finish(pw, &err);
        return;
    }
    if (!sb->ready || !sb->chan) {
        retry_or_give_up(pw); /* starting or resuming: its agent may answer soon */
        return;
    }
    json_t *req =
        json_pack("{s:s,s:i,s:b}", "op", "tcp_connect", "port", (int)pw->port, "probe", 1);
    int r = channel_open(sb->chan, req, &probe_ops, pw, &pw->st, &err);
    json_decref(req);
    if (r < 0) {
        pw->st = NULL;
        finish(pw, &err);
    }
}

struct portwait *portwait_start(struct manager *m, const struct auth_identity *who,
                                const char *sandbox_id, unsigned port, long long timeout_ms,
                                portwait_fn cb, void *data)
{
    struct portwait *pw = sbx_xcalloc(1, sizeof(*pw));
    pw->m = m;
    pw->who = *who;
    snprintf(pw->sandbox_id, sizeof(pw->sandbox_id), "%s", sandbox_id);
    pw->port = port;
    pw->deadline = sbx_now_ms() + timeout_ms;
    pw->cb = cb;
    pw->data = data;
    pw->timer = loop_timer_add(manager_loop(m), 0, try_connect, pw);
    return pw;
}

void portwait_cancel(struct portwait *pw)
{
    if (!pw)
        return;
    if (pw->timer)
        loop_timer_cancel(manager_loop(pw->m), pw->timer);
    if (pw->st)
        channel_detach(pw->st);
    free(pw);
}
