#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/shdecl.h"
#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "conn.h"
#include "spawn.h"

/* What a command may leave in its state pipe: its cwd and `export -p` of an environment
 * within the bounds, where a byte may take four ("\303") and each variable adds
 * `declare -x ` and quotes. */
#define SESSION_STATE_MAX (4u * ENV_MAX_BYTES + 16u * ENV_MAX_VARS + 8192u)
/* One "K=V" string: what execve takes (MAX_ARG_STRLEN, 32 pages). */
#define SESSION_VAR_MAX (32u * 4096u)
/* A session object in a reply stays well inside one frame; past this, env is left out. */
#define SESSION_JSON_MAX (64u * 1024u)

/* Variables that describe one shell rather than the session: the cwd travels on its own,
 * SHLVL would grow by one per command, and BASH_ENV carries our prelude. */
static const char *const volatile_vars[] = {"PWD", "SHLVL", "_", "BASH_ENV"};

struct session_run {
    struct agent *agent;
    char id[SESSION_ID_MAX + 1];
    unsigned long long gen;
    bool created, capture;
    bool resident, saved;            /* run by a resident shell (spare.c), which saves for it */
    int state_r, state_w, prelude_r; /* -1 when closed */
    struct loop_watch *w;
    char *buf;
    size_t len;
    bool overflow;
    struct envv overlay; /* the request's env: per command, not saved as such */
    char *given_cwd;     /* the request's cwd: likewise */
};

/* ---- the table ---- */

static bool session_id_valid(const char *s, size_t len)
{
    if (len == 0 || len > SESSION_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

struct session *session_find(struct agent *a, const char *id)
{
    for (unsigned i = 0; i < a->nsessions; i++)
        if (!strcmp(a->sessions[i]->id, id))
            return a->sessions[i];
    return NULL;
}

static void session_free(struct session *s)
{
    envv_free(&s->env);
    free(s->cwd);
    free(s);
}

static int session_add(struct agent *a, const char *id, json_t *env, const char *cwd,
                       long long timeout_ms, struct session **out, struct sbx_err *err)
{
    if (a->nsessions >= AGENT_MAX_SESSIONS)
        return sbx_err_set(err, ENOSPC, "too_many_sessions",
                           "at most %d sessions per sandbox; delete one first", AGENT_MAX_SESSIONS);
    struct session *s = sbx_xcalloc(1, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    envv_init_base(&s->env);
    int r = envv_set_json(&s->env, env, "env", err);
    if (r < 0) {
        session_free(s);
        return r;
    }
    s->cwd = sbx_xstrdup(cwd);
    s->timeout_ms = timeout_ms;
    s->gen = ++a->session_gen;
    s->created_at = sbx_wall_ms() / 1000;
    a->sessions[a->nsessions++] = s;
    *out = s;
    return 0;
}

static void session_remove(struct agent *a, struct session *s)
{
    for (unsigned i = 0; i < a->nsessions; i++) {
        if (a->sessions[i] == s) {
            /* Keep creation order for listings. */
            memmove(&a->sessions[i], &a->sessions[i + 1],
                    (a->nsessions - i - 1) * sizeof(a->sessions[0]));
            a->nsessions--;
            break;
        }
    }
    session_free(s);
}

/* {id, cwd, env, command_timeout_ms, created_at}; env lists what differs from the
 * base environment (values that are not UTF-8 are left out). */
static json_t *session_json(const struct session *s)
{
    json_t *env = json_object();
    for (size_t i = 0; i < s->env.n; i++) {
        const char *kv = s->env.v[i];
        if (envv_is_base(kv))
            continue;
        const char *eq = strchr(kv, '=');
        char name[256];
        if ((size_t)(eq - kv) >= sizeof(name))
            continue;
        memcpy(name, kv, (size_t)(eq - kv));
        name[eq - kv] = '\0';
        json_t *v = json_string(eq + 1);
        if (v)
            json_object_set_new(env, name, v);
    }
    json_t *o =
        json_pack("{s:s,s:s,s:o,s:o,s:I}", "id", s->id, "cwd", s->cwd, "env", env,
                  "command_timeout_ms", s->timeout_ms ? json_integer(s->timeout_ms) : json_null(),
                  "created_at", (json_int_t)s->created_at);
    char *dump = json_dumps(o, JSON_COMPACT);
    if (!dump || strlen(dump) > SESSION_JSON_MAX) {
        json_object_set_new(o, "env", json_object());
        json_object_set_new(o, "env_truncated", json_true());
    }
    free(dump);
    return o;
}

/* ---- ops ---- */

static int parse_id(json_t *req, const char *field, bool required, const char **out,
                    struct sbx_err *err)
{
    json_t *v = json_object_get(req, field);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return sbx_err_set(err, EINVAL, "bad_request", "%s is required", field);
        return 0;
    }
    if (!json_is_string(v) || !session_id_valid(json_string_value(v), json_string_length(v)))
        return sbx_err_set(err, EINVAL, "bad_request", "%s must be 1 to %d of [A-Za-z0-9_.-]",
                           field, SESSION_ID_MAX);
    *out = json_string_value(v);
    return 0;
}

int session_create_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    const char *sid;
    int r = parse_id(req, "id", true, &sid, err);
    if (r < 0)
        return r;
    const char *cwd = SESSION_CWD_DEFAULT;
    json_t *v = json_object_get(req, "cwd");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
            strlen(json_string_value(v)) != json_string_length(v))
            return sbx_err_set(err, EINVAL, "bad_request", "cwd must be an absolute path");
        cwd = json_string_value(v);
    }
    long long timeout_ms = 0;
    v = json_object_get(req, "timeout_ms");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return sbx_err_set(err, EINVAL, "bad_request",
                               "timeout_ms must be a non-negative integer");
        timeout_ms = json_integer_value(v);
    }
    bool root;
    if ((r = spawn_user_parse(req, &root, err)) < 0)
        return r;
    if (session_find(a, sid))
        return sbx_err_set(err, EEXIST, "session_exists", "session %s already exists", sid);
    struct stat st;
    if (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode))
        return sbx_err_set(err, ENOTDIR, "invalid_cwd", "%s is not a directory in the sandbox",
                           cwd);
    struct session *s;
    r = session_add(a, sid, json_object_get(req, "env"), cwd, timeout_ms, &s, err);
    if (r < 0)
        return r;
    s->root = root;
    conn_send_json(a, id, PROTO_EXIT, session_json(s));
    return 0;
}

int session_list_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    /* "ensure": a session that must exist (the default one), made like an auto-created one. */
    const char *ensure;
    int r = parse_id(req, "ensure", false, &ensure, err);
    if (r < 0)
        return r;
    if (ensure && !session_find(a, ensure)) {
        struct session *s;
        r = session_add(a, ensure, json_object_get(req, "session_env"), SESSION_CWD_DEFAULT, 0, &s,
                        err);
        if (r < 0)
            return r;
    }
    /* Without env: a list of full sessions could outgrow a frame. */
    json_t *list = json_array();
    for (unsigned i = 0; i < a->nsessions; i++) {
        json_t *o = session_json(a->sessions[i]);
        json_object_del(o, "env");
        json_object_del(o, "env_truncated");
        json_array_append_new(list, o);
    }
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:o}", "sessions", list));
    return 0;
}

int session_delete_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    const char *sid;
    int r = parse_id(req, "id", true, &sid, err);
    if (r < 0)
        return r;
    struct session *s = session_find(a, sid);
    if (!s)
        return sbx_err_set(err, ENOENT, "session_not_found", "no session %s", sid);
    /* Commands still running in it go on; their state is not saved (the generation moved on). */
    session_remove(a, s);
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:s,s:b}", "id", sid, "deleted", 1));
    return 0;
}

int session_resolve(struct agent *a, json_t *req, struct session **out, bool *created,
                    struct sbx_err *err)
{
    const char *sid;
    *out = NULL;
    *created = false;
    int r = parse_id(req, "session", false, &sid, err);
    if (r < 0 || !sid)
        return r;
    struct session *s = session_find(a, sid);
    if (!s) {
        r = session_add(a, sid, json_object_get(req, "session_env"), SESSION_CWD_DEFAULT, 0, &s,
                        err);
        if (r < 0)
            return r;
        *created = true;
    }
    *out = s;
    return 0;
}

/* ---- a command in a session ---- */

const char *session_cwd(const struct session *s)
{
    /* A session whose directory was removed starts over in the default one rather
     * than failing every command until the caller passes a cwd. */
    struct stat st;
    return stat(s->cwd, &st) == 0 && S_ISDIR(st.st_mode) ? s->cwd : SESSION_CWD_DEFAULT;
}

/* Sourced through BASH_ENV by the command's bash before the command itself, so the
 * command's text, $0 and line numbers are exactly those of `bash -c S`. The trap writes
 * "cwd\0", then what `export -p` prints (src/common/shdecl.h), then "\0", with builtins
 * only (no fork). A loop over every variable in shell code cost 1.5 ms a command. */
static const char *session_prelude(void)
{
    static char text[512];
    if (text[0])
        return text;
    snprintf(text, sizeof(text),
             "unset BASH_ENV; exec %d<&-; trap -- 'builtin printf \"%%s\\0\" \"$PWD\" >&%d 2>&-; "
             "builtin export -p >&%d 2>&-; builtin printf \"\\0\" >&%d 2>&-' EXIT\n",
             SESSION_FD_PRELUDE, SESSION_FD_STATE, SESSION_FD_STATE, SESSION_FD_STATE);
    return text;
}

static void run_close_fds(struct session_run *run)
{
    if (run->w) {
        loop_watch_del(run->agent->loop, run->w);
        run->w = NULL;
    }
    sbx_closep(&run->state_r);
    sbx_closep(&run->state_w);
    sbx_closep(&run->prelude_r);
    run->state_r = run->state_w = run->prelude_r = -1;
}

/* Read what the pipe holds now; past the bound the state is dropped, but the pipe
 * is still drained so the command's trap never blocks. */
static void run_read(struct session_run *run)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(run->state_r, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 && run->w) {
                loop_watch_del(run->agent->loop, run->w);
                run->w = NULL;
            }
            return;
        }
        if (run->overflow || run->len + (size_t)n > SESSION_STATE_MAX) {
            run->overflow = true;
            continue;
        }
        run->buf = sbx_xrealloc(run->buf, run->len + (size_t)n);
        memcpy(run->buf + run->len, tmp, (size_t)n);
        run->len += (size_t)n;
    }
}

static void run_readable(struct loop *l, int fd, uint32_t events, void *data)
{
    run_read(data);
}

static struct session_run *run_new(struct agent *a, const struct session *s)
{
    struct session_run *run = sbx_xcalloc(1, sizeof(*run));
    run->agent = a;
    snprintf(run->id, sizeof(run->id), "%s", s->id);
    run->gen = s->gen;
    run->state_r = run->state_w = run->prelude_r = -1;
    envv_init_empty(&run->overlay);
    return run;
}

int session_run_begin(struct agent *a, struct session *s, bool created, bool capture,
                      json_t *overlay, struct envv *env, struct spawn_req *sr,
                      struct session_run **out, struct sbx_err *err)
{
    struct session_run *run = run_new(a, s);
    run->created = created;
    run->capture = capture;
    int r = envv_set_json(&run->overlay, overlay, "env", err);
    if (r < 0)
        goto fail;
    if (sr->cwd)
        run->given_cwd = sbx_xstrdup(sr->cwd);
    else
        sr->cwd = session_cwd(s);
    if (!capture) {
        *out = run;
        return 0;
    }
    char bash_env[32];
    snprintf(bash_env, sizeof(bash_env), "BASH_ENV=/dev/fd/%d", SESSION_FD_PRELUDE);
    if (envv_set(env, bash_env, strlen(bash_env)) < 0) {
        r = sbx_err_set(err, E2BIG, "bad_request", "the session's environment is full");
        goto fail;
    }
    /* The write end stays blocking: the trap's export -p may be far larger than the pipe,
     * and a write that met EAGAIN would cut the state short. The agent drains it. */
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        r = sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
        goto fail;
    }
    run->state_r = p[0];
    run->state_w = p[1];
    if (sbx_set_nonblock(run->state_r) < 0) {
        r = sbx_err_set(err, errno, "spawn_failed", "fcntl: %s", strerror(errno));
        goto fail;
    }
    if ((r = spawn_pipe(sr, p, O_CLOEXEC)) < 0) {
        r = sbx_err_set(err, -r, "spawn_failed", "pipe: %s", strerror(-r));
        goto fail;
    }
    run->prelude_r = p[0];
    /* Far below the pipe's capacity, so this never blocks. */
    const char *text = session_prelude();
    r = sbx_write_all(p[1], text, strlen(text));
    close(p[1]);
    if (r < 0) {
        r = sbx_err_set(err, -r, "spawn_failed", "writing the session prelude: %s", strerror(-r));
        goto fail;
    }
    r = loop_watch_add(a->loop, run->state_r, EPOLLIN, run_readable, run, &run->w);
    if (r < 0) {
        r = sbx_err_set(err, -r, "spawn_failed", "watching the state pipe: %s", strerror(-r));
        goto fail;
    }
    sr->extra[SESSION_FD_STATE - SPAWN_EXTRA_FD_MIN] = run->state_w;
    sr->extra[SESSION_FD_PRELUDE - SPAWN_EXTRA_FD_MIN] = run->prelude_r;
    *out = run;
    return 0;
fail:
    session_run_free(run);
    return r;
}

void session_run_spawned(struct session_run *run)
{
    sbx_closep(&run->state_w);
    sbx_closep(&run->prelude_r);
    run->state_w = run->prelude_r = -1;
}

void session_run_free(struct session_run *run)
{
    if (!run)
        return;
    run_close_fds(run);
    envv_free(&run->overlay);
    free(run->given_cwd);
    free(run->buf);
    free(run);
}

static bool name_valid(const char *s, size_t len)
{
    if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

static bool is_volatile(const char *name, size_t len)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(volatile_vars); i++)
        if (strlen(volatile_vars[i]) == len && !strncmp(volatile_vars[i], name, len))
            return true;
    return false;
}

static int keep_var(const char *name, size_t name_len, const char *value, size_t value_len,
                    void *data)
{
    if (!name_valid(name, name_len) || is_volatile(name, name_len))
        return 0;
    /* Past the kernel's limit on one environment string no later command could start. */
    if (name_len + 1 + value_len + 1 > SESSION_VAR_MAX)
        return -E2BIG;
    _cleanup_free_ char *kv = sbx_xasprintf("%s=%s", name, value);
    return envv_set(data, kv, name_len + 1 + value_len);
}

/* Parse "cwd\0" + `export -p` + "\0" into s. Returns false (s untouched) on anything else. */
static bool run_apply(struct session_run *run, const char *buf, size_t len, struct session *s)
{
    const char *p = buf, *end = buf + len;
    if (len < 2 || end[-1] != '\0')
        return false;
    const char *cwd = p;
    p += strlen(p) + 1;
    if (p >= end || memchr(p, '\0', (size_t)(end - 1 - p)))
        return false; /* something wrote after the terminator: not ours */
    struct envv env;
    envv_init_empty(&env);
    if (shdecl_parse(p, (size_t)(end - 1 - p), keep_var, &env) < 0) {
        envv_free(&env);
        return false;
    }
    /* A variable the request set for this command only and the command left as it was
     * goes back to what the session had. */
    for (size_t i = 0; i < run->overlay.n; i++) {
        const char *kv = run->overlay.v[i];
        size_t klen = (size_t)(strchr(kv, '=') - kv);
        const char *now = envv_find(&env, kv, klen);
        if (!now || strcmp(now, kv))
            continue;
        const char *before = envv_find(&s->env, kv, klen);
        if (before)
            (void)envv_set(&env, before, strlen(before));
        else
            envv_unset(&env, kv, klen);
    }
    envv_free(&s->env);
    s->env = env;
    if (cwd[0] == '/' && !(run->given_cwd && !strcmp(cwd, run->given_cwd))) {
        free(s->cwd);
        s->cwd = sbx_xstrdup(cwd);
    }
    return true;
}

struct session_run *session_run_resident(struct agent *a, struct session *s)
{
    struct session_run *run = run_new(a, s);
    run->resident = true;
    return run;
}

bool session_run_save(struct session_run *run, const char *state, size_t len)
{
    struct session *s = session_find(run->agent, run->id);
    run->saved = s && s->gen == run->gen && run_apply(run, state, len, s);
    return run->saved;
}

json_t *session_run_end(struct session_run *run)
{
    bool saved = false;
    if (run->capture && run->state_r >= 0) {
        run_read(run); /* the trap ran before the shell exited: all of it is in the pipe */
        struct session *s = session_find(run->agent, run->id);
        if (s && s->gen == run->gen && !run->overflow)
            saved = run_apply(run, run->buf, run->len, s);
        snprintf(run->agent->spare_for, sizeof(run->agent->spare_for), "%s", run->id);
    } else if (run->resident) {
        saved = run->saved;
        snprintf(run->agent->spare_for, sizeof(run->agent->spare_for), "%s", run->id);
    }
    json_t *o = json_pack("{s:s,s:b,s:b}", "id", run->id, "created", run->created, "saved", saved);
    session_run_free(run);
    return o;
}
