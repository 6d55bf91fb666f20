/* POST /v1/sandboxes/{id}/exec and POST /v1/sandboxes/run. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../exec.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "api.h"

struct exec_req {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    struct sandbox *sb;
    json_t *body;
    struct exec_params params;
    struct exec_run *run;
    bool one_shot; /* /run: the sandbox goes when the command ends */
};

static void exec_req_free(struct exec_req *x)
{
    exec_params_clear(&x->params);
    json_decref(x->body);
    free(x);
}

static void end_one_shot(struct exec_req *x)
{
    if (!x->one_shot || !x->sb)
        return;
    struct sbx_err err = {0};
    (void)manager_destroy(x->d->mgr, x->sb, "run_finished", &err);
    x->sb = NULL;
}

static void on_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    const char *sandbox_id = x->sb ? x->sb->rec.id : "";
    if (x->req) {
        if (err) {
            http_respond_error(x->req, err);
        } else {
            json_t *o = exec_result_to_json(res);
            if (x->one_shot)
                json_object_set_new(o, "sandbox_id", json_string(sandbox_id));
            http_respond_json(x->req, 200, o);
        }
    }
    x->run = NULL;
    end_one_shot(x);
    exec_req_free(x);
}

static void on_abort(struct http_req *req, void *data)
{
    struct exec_req *x = data;
    x->req = NULL;
    if (x->run) {
        /* The command keeps running; a one-shot sandbox still goes when it ends. */
        if (!x->one_shot) {
            exec_abandon(x->run);
            exec_req_free(x);
        }
        return;
    }
    sandbox_drop_waiter(x->sb, x);
    end_one_shot(x);
    exec_req_free(x);
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct exec_req *x = data;
    struct sbx_err e = {0};
    if (err) {
        e = *err;
    } else if (exec_start(sb, &x->params, on_done, x, &x->run, &e) == 0) {
        return;
    }
    if (x->req)
        http_respond_error(x->req, &e);
    end_one_shot(x);
    exec_req_free(x);
}

static void start(struct sbxd *d, struct http_req *req, struct exec_req *x)
{
    x->d = d;
    x->req = req;
    http_req_suspend(req, on_abort, x);
    sandbox_when_ready(x->sb, on_ready, x);
}

void api_exec(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct exec_req *x = sbx_xcalloc(1, sizeof(*x));
    if (http_req_json(req, &x->body, &err) < 0 ||
        exec_params_parse(x->body, &x->params, &err) < 0 ||
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

void api_run(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct exec_req *x = sbx_xcalloc(1, sizeof(*x));
    struct sandbox_params sp;
    x->one_shot = true;
    if (http_req_json(req, &x->body, &err) < 0 ||
        exec_params_parse(x->body, &x->params, &err) < 0 ||
        sandbox_params_parse(x->body, &sp, &err) < 0 ||
        manager_create(d->mgr, http_req_identity(req), &sp, NULL, NULL, &x->sb, &err) < 0) {
        exec_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    start(d, req, x);
}
