/* Builds of the operator's templates (templates/NAME: base, office, desktop) started by sbxd,
 * for POST /v1/sandbox-configs/templates/query (docs/configs.md). They are built by the
 * operator's own script, scripts/build-template.sh NAME, exactly as `make run` builds them
 * (debootstrap or the parent's tree, the recipe digest, the atomic link), run on the host
 * with its output piped into a build record like a custom template's: the same events (step,
 * log, done/error), the same GET /v1/templates/NAME/build and build-events, the same limit
 * on builds at once. The daemon's SIGCHLD handler reaps every child (main.c), so the
 * script's exit status is not what decides: the build is ready when, its output closed, the
 * template it was to make is there (its manifest read back), else it failed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/spawn.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "build_internal.h"

extern char **environ;

#define OPERATOR_READ_MAX 65536 /* bytes read from the script per wake-up */

struct operator_run {
    struct template_build *tb;
    struct loop *loop;
    pid_t pid; /* its process group too (POSIX_SPAWN_SETPGROUP) */
    int fd[2]; /* the script's stdout and stderr; -1 once closed */
    struct loop_watch *w[2];
    struct loop_timer *timer;     /* TEMPLATE_BUILD_TTL_S */
    char tail[TEMPLATE_LOG_TAIL]; /* the last stderr bytes, for the error */
    size_t tail_len;
};

static void run_free(struct operator_run *op)
{
    for (int ch = 0; ch < 2; ch++) {
        loop_watch_del(op->loop, op->w[ch]);
        if (op->fd[ch] >= 0)
            close(op->fd[ch]);
    }
    if (op->timer)
        loop_timer_cancel(op->loop, op->timer);
    op->tb->op = NULL;
    free(op);
}

void operator_run_abandon(struct operator_run *op)
{
    /* The script's own traps remove a half-made tree and release its lock. */
    if (kill(-op->pid, SIGTERM) < 0 && errno != ESRCH)
        log_warn("template build %s: stopping its script: %s", op->tb->id, strerror(errno));
    run_free(op);
}

static void keep_tail(struct operator_run *op, const char *buf, size_t n)
{
    if (n >= sizeof(op->tail)) {
        memcpy(op->tail, buf + n - sizeof(op->tail), sizeof(op->tail));
        op->tail_len = sizeof(op->tail);
        return;
    }
    size_t keep = op->tail_len + n > sizeof(op->tail) ? sizeof(op->tail) - n : op->tail_len;
    memmove(op->tail, op->tail + op->tail_len - keep, keep);
    memcpy(op->tail + keep, buf, n);
    op->tail_len = keep + n;
}

/* The script's output closed: read its template back. */
static void finish(struct operator_run *op)
{
    struct template_build *tb = op->tb;
    build_flush_lines(tb);
    tb->cur++;
    build_step_event(tb);
    json_t *m = NULL;
    struct sbx_err err = {0};
    int r = template_load(tb->b->cfg->template_cache, tb->name, &m, NULL, &err);
    tb->finished_at = sbx_wall_ms() / 1000;
    long long elapsed = sbx_now_ms() - tb->t0_ms;
    if (r == 0) {
        tb->manifest = m;
        tb->status = TB_READY;
        tb->cur = tb->nsteps;
        log_info("template build %s: the operator's %s ready (%lld s)", tb->id, tb->name,
                 tb->finished_at - tb->started_at);
        build_emit(tb, json_pack("{s:s,s:s,s:i,s:I,s:o}", "type", "done", "status", "ready",
                                 "percent", 100, "elapsed_ms", (json_int_t)elapsed, "build",
                                 template_build_json(tb)));
    } else {
        tb->status = TB_FAILED;
        tb->error =
            json_pack("{s:s,s:s,s:s+}", "step", "check", "code", "template_build_failed", "message",
                      "scripts/build-template.sh ended without building ", tb->name);
        if (op->tail_len)
            json_object_set_new(tb->error, "stderr_tail", build_text_json(op->tail, op->tail_len));
        log_warn("template build %s: the operator's %s failed", tb->id, tb->name);
        build_emit(tb, json_pack("{s:s,s:s,s:O,s:I}", "type", "error", "status", "failed", "error",
                                 tb->error, "elapsed_ms", (json_int_t)elapsed));
    }
    run_free(op);
    build_end_watchers(tb);
}

static void on_readable(struct loop *l, int fd, uint32_t events, void *data)
{
    struct operator_run *op = data;
    int ch = fd == op->fd[1];
    char buf[OPERATOR_READ_MAX];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        build_output(op->tb, (unsigned)ch, (const uint8_t *)buf, (size_t)n);
        if (ch == 1)
            keep_tail(op, buf, (size_t)n);
        return;
    }
    loop_watch_del(l, op->w[ch]);
    op->w[ch] = NULL;
    close(op->fd[ch]);
    op->fd[ch] = -1;
    if (op->fd[0] < 0 && op->fd[1] < 0)
        finish(op);
}

static void on_timeout(struct loop *l, void *data)
{
    struct operator_run *op = data;
    op->timer = NULL;
    /* The output closes when the script ends; finish() then finds no template. */
    log_warn("template build %s: the script ran past %d s: stopping it", op->tb->id,
             TEMPLATE_BUILD_TTL_S);
    if (kill(-op->pid, SIGTERM) < 0 && errno != ESRCH)
        log_warn("template build %s: stopping its script: %s", op->tb->id, strerror(errno));
}

/* environ with SBX_TEMPLATE_CACHE set to the daemon's cache (the script's default may
 * differ from what sbxd was told). The strings are borrowed but the one it adds. */
static char **script_env(const char *cache, char **own)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **v = sbx_xcalloc(n + 2, sizeof(*v));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "SBX_TEMPLATE_CACHE=", 19))
            v[k++] = environ[i];
    *own = sbx_xasprintf("SBX_TEMPLATE_CACHE=%s", cache);
    v[k] = *own;
    return v;
}

static int spawn_script(struct template_builds *b, struct operator_run *op, const char *name,
                        struct sbx_err *err)
{
    int out[2] = {-1, -1}, errp[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (errp[i] >= 0)
                close(errp[i]);
        }
        return sbx_err_sys(err, e, "a pipe for the template script");
    }
    /* Its own process group, so that stopping it stops debootstrap and apt too. */
    struct sbx_spawn_opts o = {
        .out = out[1], .err = errp[1], .keep_fd = -1, .own_group = true, .clean_signals = true};
    _cleanup_free_ char *own = NULL;
    _cleanup_free_ char **env = script_env(b->cfg->template_cache, &own);
    char *argv[] = {b->cfg->template_script, (char *)name, NULL};
    int r = -sbx_spawn(&op->pid, argv, env, &o);
    close(out[1]);
    close(errp[1]);
    op->fd[0] = out[0];
    op->fd[1] = errp[0];
    if (r != 0)
        return sbx_err_set(err, r, "template_build_failed", "starting %s: %s",
                           b->cfg->template_script, strerror(r));
    for (int ch = 0; ch < 2; ch++) {
        if ((r = loop_watch_add(b->loop, op->fd[ch], EPOLLIN, on_readable, op, &op->w[ch])) < 0) {
            (void)kill(-op->pid, SIGTERM);
            return sbx_err_sys(err, -r, "watching the template script's output");
        }
    }
    op->timer = loop_timer_add(b->loop, TEMPLATE_BUILD_TTL_S * 1000LL, on_timeout, op);
    return 0;
}

int template_build_operator(struct template_builds *b, const char *name,
                            struct template_build **out, struct sbx_err *err)
{
    struct template_build *cur = build_by_name(b, name);
    if (cur && cur->status == TB_BUILDING) {
        if (!cur->op)
            return sbx_err_set(err, EBUSY, "template_building",
                               "a custom template named %s is being built (%s)", name, cur->id);
        *out = cur; /* join the build under way */
        return 0;
    }
    if (build_running(b) >= (size_t)b->cfg->template_builds_max)
        return sbx_err_set(err, EAGAIN, "template_build_limit",
                           "at most %lld template builds run at once here "
                           "(SBX_TEMPLATE_BUILDS_MAX): retry later",
                           b->cfg->template_builds_max);
    struct template_build *tb = sbx_xcalloc(1, sizeof(*tb));
    tb->b = b;
    tb->events = json_array();
    tb->shared = true; /* the operator's templates are everyone's */
    snprintf(tb->name, sizeof(tb->name), "%s", name);
    sbx_random_id("tb_", 10, tb->id, sizeof(tb->id));
    tb->started_at = sbx_wall_ms() / 1000;
    tb->t0_ms = sbx_now_ms();
    tb->steps[0] = (struct step){.label = "script", .kind = S_SCRIPT};
    tb->steps[1] = (struct step){.label = "check", .kind = S_CHECK};
    tb->nsteps = 2;
    struct operator_run *op = sbx_xcalloc(1, sizeof(*op));
    op->tb = tb;
    op->loop = b->loop;
    op->fd[0] = op->fd[1] = -1;
    tb->op = op;
    int r = spawn_script(b, op, name, err);
    if (r < 0) {
        run_free(op);
        build_free(tb);
        return r;
    }
    template_build_forget(b, name);
    build_remember(b, tb);
    log_info("template build %s: the operator's %s, by %s", tb->id, name, b->cfg->template_script);
    build_step_event(tb);
    *out = tb;
    return 0;
}

bool template_build_ended(const struct template_build *tb, bool *ready)
{
    *ready = tb->status == TB_READY;
    return tb->status != TB_BUILDING;
}
