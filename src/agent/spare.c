#include "spare.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"
#include "agent.h"
#include "env.h"
#include "session.h"
#include "spawn.h"

/* What the spare runs once its prelude (which sets __sbx_c) has been sourced. */
#define SPARE_SCRIPT "eval -- \"$__sbx_c\""

struct spare {
    char sid[SESSION_ID_MAX + 1];
    unsigned long long gen;
    bool root;
    char *cwd;
    dev_t cwd_dev; /* what cwd was when the shell entered it */
    ino_t cwd_ino;
    struct envv env; /* the session's environment it started with */
    pid_t pid;
    struct spawn_fds fds;
    int prelude_w;
    struct session_run *run;
};

static void spare_free(struct spare *sp)
{
    if (!sp)
        return;
    sbx_closep(&sp->prelude_w);
    sbx_closep(&sp->fds.out_r);
    sbx_closep(&sp->fds.err_r);
    session_run_free(sp->run);
    envv_free(&sp->env);
    free(sp->cwd);
    free(sp);
}

/* Kill the waiting shell in slot i (the reaper collects it as an unowned child). */
static void spare_drop(struct agent *a, unsigned i)
{
    struct spare *sp = TAKE_PTR(a->spares[i]);
    if (!sp)
        return;
    (void)kill(-sp->pid, SIGKILL);
    spare_free(sp);
}

void spare_drop_all(struct agent *a)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        spare_drop(a, i);
}

/* The slot of session id's spare, or -1. */
static int spare_slot(const struct agent *a, const char *sid)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        if (a->spares[i] && !strcmp(a->spares[i]->sid, sid))
            return (int)i;
    return -1;
}

static bool env_equal(const struct envv *x, const struct envv *y)
{
    if (x->n != y->n)
        return false;
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->v[i], y->v[i]))
            return false;
    return true;
}

/* The same directory, not only the same path: one removed and made again meanwhile is
 * another, which a fresh shell would enter. */
static bool same_cwd(const struct spare *sp, const char *cwd)
{
    struct stat now;
    return !strcmp(sp->cwd, cwd) && stat(cwd, &now) == 0 && now.st_dev == sp->cwd_dev &&
           now.st_ino == sp->cwd_ino;
}

static bool spare_fits(const struct spare *sp, const struct session *s, bool root)
{
    return !strcmp(sp->sid, s->id) && sp->gen == s->gen && sp->root == root &&
           env_equal(&sp->env, &s->env) && same_cwd(sp, session_cwd(s));
}

/* The prelude, then SECONDS=0 (bash counts them from its start, which was a while ago)
 * and __sbx_c='S' (each ' as '\''). NULL when it would not fit. */
static char *prelude_with(const char *cmd, size_t *len)
{
    const char *pre = session_prelude();
    size_t plen = strlen(pre), clen = strlen(cmd), quotes = 0;
    if (clen > SPARE_CMD_MAX)
        return NULL;
    for (size_t i = 0; i < clen; i++)
        quotes += cmd[i] == '\'';
    size_t cap = plen + sizeof("SECONDS=0 __sbx_c=''\n") + clen + 3 * quotes;
    char *t = sbx_xmalloc(cap), *p = t;
    memcpy(p, pre, plen);
    p += plen;
    memcpy(p, "SECONDS=0 __sbx_c='", 19);
    p += 19;
    for (size_t i = 0; i < clen; i++) {
        if (cmd[i] == '\'') {
            memcpy(p, "'\\''", 4);
            p += 4;
        } else {
            *p++ = cmd[i];
        }
    }
    memcpy(p, "'\n", 2);
    p += 2;
    *len = (size_t)(p - t);
    return t;
}

bool spare_take(struct agent *a, struct session *s, bool root, const char *cmd, pid_t *pid,
                struct spawn_fds *fds, struct session_run **run)
{
    int i = spare_slot(a, s->id);
    if (i < 0)
        return false;
    struct spare *sp = a->spares[i];
    if (!spare_fits(sp, s, root)) {
        /* From before: the refill after this command starts the right one. */
        spare_drop(a, (unsigned)i);
        return false;
    }
    size_t len = 0;
    _cleanup_free_ char *text = prelude_with(cmd, &len);
    if (!text)
        return false;
    /* Into an empty pipe: all of it or nothing, unless the shell is gone (EPIPE). */
    ssize_t n;
    do
        n = write(sp->prelude_w, text, len);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len) {
        spare_drop(a, (unsigned)i);
        return false;
    }
    a->spares[i] = NULL;
    sbx_closep(&sp->prelude_w); /* the end of the prelude: bash goes on */
    sp->prelude_w = -1;
    *pid = sp->pid;
    *fds = sp->fds;
    sp->fds.out_r = sp->fds.err_r = -1;
    *run = TAKE_PTR(sp->run);
    spare_free(sp);
    return true;
}

void spare_refill(struct agent *a)
{
    if (!a->spare_for[0])
        return;
    struct session *s = session_find(a, a->spare_for);
    a->spare_for[0] = '\0';
    if (!s)
        return;
    int i = spare_slot(a, s->id);
    if (i >= 0 && spare_fits(a->spares[i], s, s->root)) {
        a->spare_tick[i] = ++a->spare_clock;
        return;
    }
    if (i < 0) { /* a free slot, else the one used longest ago */
        i = 0;
        for (unsigned k = 0; k < AGENT_MAX_SPARES; k++) {
            if (!a->spares[k]) {
                i = (int)k;
                break;
            }
            if (a->spare_tick[k] < a->spare_tick[i])
                i = (int)k;
        }
    }
    spare_drop(a, (unsigned)i);

    struct spare *sp = sbx_xcalloc(1, sizeof(*sp));
    sp->prelude_w = sp->fds.in_w = sp->fds.out_r = sp->fds.err_r = -1;
    snprintf(sp->sid, sizeof(sp->sid), "%s", s->id);
    sp->gen = s->gen;
    sp->root = s->root;
    sp->cwd = sbx_xstrdup(session_cwd(s));
    struct stat st;
    if (stat(sp->cwd, &st) < 0) {
        spare_free(sp);
        return;
    }
    envv_copy(&sp->env, &s->env);
    struct envv env;
    envv_copy(&env, &s->env);
    static const char *const argv[] = {"/bin/bash", "-c", SPARE_SCRIPT, NULL};
    struct spawn_req sr = {.argv = argv, .cwd = sp->cwd, .extra = {-1, -1}, .root = sp->root};
    struct sbx_err err = {0};
    int r = session_run_begin_held(a, s, &env, &sr, &sp->prelude_w, &sp->run, &err);
    if (r == 0) {
        sr.envp = env.v;
        r = spawn_command(&sr, &sp->pid, &sp->fds, &err);
        session_run_spawned(sp->run);
    }
    envv_free(&env);
    /* Looked at again now the shell is in it: a directory replaced in between is not the
     * one it holds. */
    struct stat after;
    if (r == 0 &&
        (stat(sp->cwd, &after) < 0 || after.st_dev != st.st_dev || after.st_ino != st.st_ino)) {
        (void)kill(-sp->pid, SIGKILL);
        r = -ESTALE;
    }
    sp->cwd_dev = st.st_dev;
    sp->cwd_ino = st.st_ino;
    if (r < 0) {
        spare_free(sp);
        return;
    }
    a->spares[i] = sp;
    a->spare_tick[i] = ++a->spare_clock;
}
