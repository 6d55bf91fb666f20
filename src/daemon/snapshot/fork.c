/* Fork: checkpoint the parent once, copy its still workspace per copy, then restore
 * every copy from the same image (each its own id and workspace).
 *
 * Where runsc resumes in place, the parent is paused for the checkpoint and the copies
 * and resumed once they are made: stopped for one checkpoint and the workspace clones.
 * With an older runsc a checkpoint stops it, and it is restored from the image too.
 *
 * The copies (a sparse clone of the workspace image, or cp -a) run on worker threads,
 * side by side; each copy is restored as soon as its workspace is there, and the parent
 * goes on as soon as the last copy has read its workspace. */
#include "snapshot.h"

#include <errno.h>
#include <string.h>

#include "../../common/jobs.h"
#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/wsimage.h"
#include "../store/volumes.h"
#include "checkpoint.h"

struct fork_op {
    struct manager *m;
    struct jobs *jobs;
    int frozen;  /* the parent's frozen workspace (quota), until the last copy is made */
    int copying; /* copies still being made */
    struct auth_identity who;
    char parent_id[STORE_ID_MAX + 1];
    char *image_dir;
    int count, pending;
    long long ttl, t0;
    struct fork_child kids[SANDBOX_FORK_MAX];
    fork_done_fn cb;
    void *data;
};

static void fork_finish(struct fork_op *f, const struct sbx_err *err)
{
    if (f->image_dir)
        (void)sbx_rm_rf(f->image_dir); /* every copy has read it whole by now */
    f->cb(f->parent_id, f->kids, f->count, err, f->data);
    free(f->image_dir);
    free(f);
}

static void on_kid_ready(struct sandbox *kid, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    for (int i = 0; i < f->count; i++) {
        struct fork_child *k = &f->kids[i];
        if (strcmp(k->id, kid->rec.id))
            continue;
        k->ok = !err;
        if (err)
            k->err = *err;
        k->restored = !err && kid->restored;
        k->ready_ms = err ? 0 : kid->ready_ms;
    }
    if (--f->pending == 0)
        fork_finish(f, NULL);
}

/* One copy of the stopped parent's workspace, made on a worker: with the quota a clone
 * of the image, without it a plain recursive copy. Paths only: nothing of the loop's. */
struct ws_copy {
    struct fork_op *f;
    struct sandbox *kid; /* not yet in the manager's list */
    struct fork_child *out;
    char *from_ws, *from_img, *to_ws, *to_img; /* the images NULL without a quota */
    int ret;
    struct sbx_err err;
};

static void ws_copy_run(void *data)
{
    struct ws_copy *c = data;
    if (c->from_img)
        c->ret = wsimage_mount(c->from_img, c->to_img, c->to_ws, &c->err);
    else
        c->ret = wsimage_copy_tree(c->from_ws, c->to_ws, &c->err);
}

static void fork_copies_done(struct fork_op *f);
static void ws_copy_done(void *data, bool ran);

/* A copy that will not run: recorded as failed, its runtime state and directory gone. */
static void kid_failed(struct manager *m, struct sandbox *sb, struct sbx_err *err)
{
    (void)store_sandbox_set_status(m->store, sb->rec.id, SANDBOX_FAILED, "start_failed",
                                   sbx_wall_ms() / 1000, NULL);
    struct sbx_err e2 = {0};
    (void)rt_destroy(&m->rt, sb->rec.id, sb->state_dir, sb->dir, NULL, &e2);
    sandbox_free(sb);
    snprintf(err->code, sizeof(err->code), "sandbox_start_failed");
}

static int fork_kid(struct fork_op *f, struct sandbox *parent, struct fork_child *out,
                    struct sbx_err *err)
{
    struct manager *m = f->m;
    char id[STORE_ID_MAX + 1];
    sandbox_new_id(id);
    struct sandbox *sb = sandbox_alloc(m, id);
    struct store_sandbox *rec = &sb->rec;
    const struct store_sandbox *p = &parent->rec;
    long long now = sbx_wall_ms() / 1000;
    *rec = *p;
    snprintf(rec->id, sizeof(rec->id), "%s", id);
    snprintf(rec->key_id, sizeof(rec->key_id), "%s", f->who.key_id);
    snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_CREATING);
    rec->env_json = sbx_xstrdup(p->env_json ? p->env_json : "{}");
    rec->ttl_seconds = f->ttl ? f->ttl : p->ttl_seconds;
    rec->created_at = now;
    rec->expires_at = now + rec->ttl_seconds;
    rec->ended_at = 0;
    rec->end_reason[0] = '\0';
    int r = store_sandbox_insert(m->store, rec, err);
    if (r < 0) {
        sandbox_free(sb);
        return r;
    }
    snprintf(out->id, sizeof(out->id), "%s", id);
    snprintf(sb->parent_id, sizeof(sb->parent_id), "%s", p->id);
    (void)store_meta_set(m->store, id, STORE_META_PARENT, p->id, NULL);
    /* A copy goes out the way its parent does. */
    if ((r = store_egress_policy_copy(m->store, p->id, id, now, err)) == 0 &&
        (r = store_sandbox_config_copy(m->store, p->id, id, err)) == 0 &&
        /* The same volumes, not copies (docs/volumes.md). */
        (r = store_volume_mounts_copy(m->store, p->id, id, err)) == 0) {
        sandbox_egress_load(m, sb);
        sb->config_env = parent->config_env ? json_deep_copy(parent->config_env) : NULL;
        sb->config_inject = parent->config_inject ? json_deep_copy(parent->config_inject) : NULL;
        r = sandbox_config_settings_set(m, sb, parent->terminal_idle_sec,
                                        parent->command_timeout_sec, parent->desktop_disabled,
                                        err);
        /* A docker copy runs its parent's image, engine runtime and settings. */
        if (r == 0 && parent->docker_doc)
            r = sandbox_docker_set(m, sb, parent->docker_doc, err);
    }
    if (r == 0 &&
        ((r = sbx_mkdir_p(sb->state_dir, 0700)) < 0 || (r = sbx_mkdir_p(sb->workspace, 0755)) < 0))
        sbx_err_sys(err, -r, "creating the sandbox directory");
    if (r < 0) {
        kid_failed(m, sb, err);
        return r;
    }
    snprintf(sb->expect_boot, sizeof(sb->expect_boot), "%s", parent->boot_id);
    struct ws_copy *c = sbx_xcalloc(1, sizeof(*c));
    c->f = f;
    c->kid = sb;
    c->out = out;
    c->from_ws = sbx_xstrdup(parent->workspace);
    c->to_ws = sbx_xstrdup(sb->workspace);
    if (m->ws_template) {
        c->from_img = sbx_xasprintf("%s/workspace.img", parent->dir);
        c->to_img = sbx_xasprintf("%s/workspace.img", sb->dir);
    }
    f->copying++;
    jobs_submit(f->jobs, ws_copy_run, ws_copy_done, c);
    return 0;
}

/* On the loop: the copy's workspace is there (or not); restore it from the image. */
static void ws_copy_done(void *data, bool ran)
{
    struct ws_copy *c = data;
    struct fork_op *f = c->f;
    struct manager *m = f->m;
    struct sandbox *sb = c->kid;
    struct sbx_err err = {0};
    int r = c->ret;
    if (!ran)
        r = sbx_err_set(&err, ESHUTDOWN, "shutting_down", "sbxd is stopping");
    else if (r < 0)
        err = c->err;
    if (r == 0) {
        sb->restoring = true;
        sb->op_t0 = f->t0;
        sb->image_dir = sbx_xstrdup(f->image_dir);
        r = sandbox_launch(m, sb, f->image_dir, true, &err);
    }
    if (r < 0) {
        c->out->ok = false;
        log_error("sandbox %s: fork copy %s: %s", f->parent_id, sb->rec.id, err.msg);
        kid_failed(m, sb, &err);
        c->out->err = err;
    } else {
        sb->next = m->sandboxes;
        m->sandboxes = sb;
        sandbox_arm_ttl(m, sb);
        log_info("sandbox %s: forked from %s", sb->rec.id, f->parent_id);
        f->pending++;
        sandbox_when_ready(sb, on_kid_ready, f);
    }
    free(c->from_ws);
    free(c->to_ws);
    free(c->from_img);
    free(c->to_img);
    free(c);
    if (--f->copying == 0)
        fork_copies_done(f);
}

static void on_parent_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    if (err)
        log_error("sandbox %s: back after the fork: %s", f->parent_id, err->msg);
    if (--f->pending == 0)
        fork_finish(f, NULL);
}

/* The parent is stopped, or held: paused in place (rt_checkpoint). Its workspace is
 * still, so the copies are consistent; then every copy restores from the image, and the
 * parent goes on (held) or restores from it too. */
static void fork_on_checkpoint(struct sandbox *parent, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    if (err || parent->ended) {
        struct sbx_err gone = {0};
        if (!err)
            sbx_err_set(&gone, ECONNRESET, "sandbox_not_running", "sandbox %s went away",
                        f->parent_id);
        log_error("sandbox %s: fork: %s", f->parent_id, err ? err->msg : gone.msg);
        fork_finish(f, err ? err : &gone);
        return;
    }
    f->frozen = checkpoint_freeze_workspace(f->m, parent);
    f->copying = 1; /* until every copy is under way */
    for (int i = 0; i < f->count; i++) {
        struct sbx_err kerr = {0};
        if (fork_kid(f, parent, &f->kids[i], &kerr) < 0) {
            f->kids[i].ok = false;
            f->kids[i].err = kerr;
            log_error("sandbox %s: fork copy %d: %s", f->parent_id, i, kerr.msg);
        }
    }
    if (--f->copying == 0)
        fork_copies_done(f);
}

/* The parent was stopped by its checkpoint: it comes back from the image. */
static void parent_restore(struct fork_op *f, struct sandbox *parent)
{
    struct sbx_err perr = {0};
    parent->restoring = true;
    parent->cold_tried = false;
    parent->drop_image = false;
    parent->op_t0 = sbx_now_ms();
    snprintf(parent->expect_boot, sizeof(parent->expect_boot), "%s", parent->boot_id);
    free(parent->image_dir);
    parent->image_dir = sbx_xstrdup(f->image_dir);
    if (sandbox_launch(f->m, parent, f->image_dir, false, &perr) < 0) {
        parent->cold_tried = true;
        if (sandbox_launch(f->m, parent, NULL, false, &perr) < 0) {
            struct sbx_err derr = {0};
            (void)sandbox_destroy(f->m, parent, "start_failed", &perr, NULL, NULL, &derr);
        }
    }
    if (!parent->ended) {
        f->pending++;
        sandbox_when_ready(parent, on_parent_ready, f);
    }
}

/* Every copy has its workspace: the parent may change its own again. Held (paused in
 * place by its checkpoint), it just goes on; else it is restored. */
static void fork_copies_done(struct fork_op *f)
{
    wsimage_thaw(f->frozen);
    f->frozen = -1;
    struct sandbox *parent = manager_find_live(f->m, f->parent_id);
    if (parent && parent->held) {
        f->pending++;
        checkpoint_release(f->m, f->jobs, parent, on_parent_ready, f);
    } else if (parent) {
        parent_restore(f, parent);
    }
    f->pending--; /* the checkpoint's own count */
    if (f->pending == 0)
        fork_finish(f, NULL);
}

int snapshot_fork(struct manager *m, struct jobs *jobs, struct sandbox *sb,
                  const struct auth_identity *who, int count, long long ttl_seconds,
                  fork_done_fn cb, void *data, struct sbx_err *err)
{
    int r = checkpoint_check(sb, "fork", err);
    if (r < 0)
        return r;
    struct store_sandbox_counts n;
    if ((r = store_sandbox_counts(m->store, who->user, who->key_id, &n, err)) < 0)
        return r;
    if (n.key_active + count > SANDBOX_FORK_KEY_ACTIVE)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "a fork may not take a key past %d active sandboxes (%lld now)",
                           SANDBOX_FORK_KEY_ACTIVE, n.key_active);
    if (n.user_running + count > m->cfg->max_per_user)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "a fork may not take a user past %lld running sandboxes (%lld now)",
                           m->cfg->max_per_user, n.user_running);
    struct fork_op *f = sbx_xcalloc(1, sizeof(*f));
    f->m = m;
    f->jobs = jobs;
    f->frozen = -1;
    f->who = *who;
    snprintf(f->parent_id, sizeof(f->parent_id), "%s", sb->rec.id);
    f->count = count;
    f->ttl = ttl_seconds;
    f->t0 = sbx_now_ms();
    f->pending = 1;
    f->cb = cb;
    f->data = data;
    char hex[13];
    sbx_random_id("", 6, hex, sizeof(hex));
    f->image_dir = sbx_xasprintf("%s/snapshots/fork-%s", sb->dir, hex);
    if ((r = checkpoint_start(sb, f->image_dir, true, err)) < 0) {
        free(f->image_dir);
        free(f);
        return r;
    }
    sb->pausing = sb->forking = true;
    sb->chan_lost = false;
    sb->ready = false; /* requests wait for the parent to be back */
    sb->op_cb = fork_on_checkpoint;
    sb->op_data = f;
    return 0;
}
