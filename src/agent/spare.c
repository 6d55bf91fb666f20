#include "spare.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/sbxuser.h"
#include "../common/shrecord.h"
#include "../common/util.h"
#include "agent.h"
#include "env.h"
#include "procstat.h"
#include "session.h"
#include "spawn.h"

/* The shell's fds: its records, and the control pipe it reads command numbers and
 * answers from (closed for the command itself). */
#define SPARE_FD_STATE SESSION_FD_STATE
#define SPARE_FD_CTL SESSION_FD_PRELUDE
/* One record: "kind\0cwd\0" + `export -p` + "\0" + the EXIT trap + "\0" + the dump + "\0".
 * The exports are bounded by the session's limits (each byte may take four, "\303") and
 * come twice (the dump declares them too); the rest of the dump is what the shell holds
 * besides, which a command may make large: past this the shell is retired. */
#define SPARE_RECORD_MAX (2u * (4u * ENV_MAX_BYTES + 16u * ENV_MAX_VARS) + (1u << 20))
/* The shell's group is looked at before reuse; past this many processes in the sandbox it
 * is retired rather than looked through. */
#define SPARE_SCAN_MAX 512

/* Kinds of record: "b" once before the first command (the dump every later one must
 * match), "d<status>" after a command, "x" from the EXIT trap. The answer to "d" is "k"
 * (go on) or "x" (exit with the command's status, in its redirections). hash -r: a fresh
 * shell has no remembered command paths. DIRSTACK holds the current directory, so only
 * its length is compared.
 *
 * The command is evaluated at the top level, as in `bash -c` (in a function, `declare`
 * would make locals and `return` would return), inside two loops that a `break` or
 * `continue` of its own may leave: the command then ends there, and the next turn reports
 * it ($__sbx_p) before reading another; `break 2` ends the shell. One line, so that the
 * command's line numbers are those it would have in `bash -c`. */
#define SPARE_NAMES                                                                                \
    "${!A*} ${!B*} ${!C*} ${!D*} ${!E*} ${!F*} ${!G*} ${!H*} ${!I*} ${!J*} ${!K*} ${!L*} ${!M*} "  \
    "${!N*} ${!O*} ${!P*} ${!Q*} ${!R*} ${!S*} ${!T*} ${!U*} ${!V*} ${!W*} ${!X*} ${!Y*} ${!Z*}"   \
    " ${!a*} ${!b*} ${!c*} ${!d*} ${!e*} ${!f*} ${!g*} ${!h*} ${!i*} ${!j*} ${!k*} ${!l*} ${!m*} " \
    "${!n*} ${!o*} ${!p*} ${!q*} ${!r*} ${!s*} ${!t*} ${!u*} ${!v*} ${!w*} ${!x*} ${!y*} ${!z*} "  \
    "${!_*}"

#define SPARE_SCRIPT                                                                               \
    "exec 1>/dev/null 2>&1; "                                                                      \
    "__sbx_rep() { "                                                                               \
    "local __sbx_m __sbx_e= __sbx_i=\"$IFS\" IFS=' '; "                                            \
    "local __sbx_a=\"" SPARE_NAMES "\" __sbx_f=(/proc/$$/fd/?); "                                  \
    "for __sbx_m in $__sbx_a; do "                                                                 \
    "[[ ${!__sbx_m@a} == *x* ]] && __sbx_e+=\"${!__sbx_m@A}\"$'\\n'; "                             \
    "done; "                                                                                       \
    "[[ . -ef $PWD ]]; __sbx_m=$?; "                                                               \
    "builtin printf '%s\\0%s\\0%s\\0' \"$1\" \"$PWD\" \"$__sbx_e\" || return; "                    \
    "builtin trap -p EXIT; "                                                                       \
    "builtin printf '\\0%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1%s\\1' "            \
    "\"$__sbx_a\" \"$0\" \"$__sbx_i\" \"$OPTIND\" \"$OPTERR\" \"$PS4\" \"$HOSTNAME\" "             \
    "\"$SHELLOPTS\" \"$BASHOPTS\" \"${#DIRSTACK[@]}\" \"$__sbx_m\" \"${__sbx_f[*]}\"; "            \
    "builtin declare -F; builtin alias -p; builtin trap -p; builtin umask; builtin ulimit -a; "    \
    "builtin jobs -p; builtin printf '\\0'; "                                                      \
    "}; "                                                                                          \
    "__sbx_out() { "                                                                               \
    "__sbx_p=; "                                                                                   \
    "{ __sbx_rep \"d$1\" >&100 && IFS= builtin read -r -u 101 __sbx_v && [[ $__sbx_v == k ]]; } "  \
    "2>/dev/null || builtin exit \"$1\"; "                                                         \
    "}; "                                                                                          \
    "__sbx_c= __sbx_n= __sbx_p= __sbx_v=; "                                                        \
    "builtin trap -- '__sbx_rep x >&100' EXIT; "                                                   \
    "__sbx_rep b >&100; "                                                                          \
    "while :; do while :; do "                                                                     \
    "[[ -z $__sbx_p ]] || __sbx_out 0 0</dev/null 1>\"$__sbx_n.o\" 2>\"$__sbx_n.e\"; "             \
    "IFS= builtin read -r -u 101 __sbx_n || builtin exit 0; "                                      \
    "IFS= builtin read -r -d '' __sbx_c <\"$__sbx_n.c\"; "                                         \
    "builtin hash -r; SECONDS=0; __sbx_p=1; "                                                      \
    "{ { builtin eval -- \"$__sbx_c\"; } 101<&-; __sbx_out \"$?\"; } 0</dev/null "                 \
    "1>\"$__sbx_n.o\" 2>\"$__sbx_n.e\" || builtin exit 1; "                                        \
    "done; done"

struct spare {
    struct agent *agent;
    char sid[SESSION_ID_MAX + 1];
    unsigned long long gen;
    bool root;
    bool as_user; /* runs as the unprivileged user: its files are made with the user's ids */
    char *cwd;    /* what the shell is in, and its device and inode */
    dev_t cwd_dev;
    ino_t cwd_ino;
    struct envv env; /* the session's environment the shell has */
    pid_t pid;
    bool reaped;  /* the pid is gone: never signal it */
    bool retired; /* not to take another command */
    bool lost;    /* a record outgrew SPARE_RECORD_MAX: the rest is skipped */
    int ctl_w, state_r;
    struct loop_watch *w;
    char *buf; /* records read and not yet handled */
    size_t len;
    size_t scanned; /* how much of buf was looked at for the record's NULs, and found */
    int nuls;
    char *base; /* the "b" record's trap and filtered dump; NULL until it came */
    size_t base_len;
    /* The command in it, between take and release. */
    bool busy, answered;
    bool done_due; /* "k" was answered: tell the stream once the records are handled */
    int done_status;
    unsigned long long seq;
    int out_hold, err_hold;  /* write ends of the FIFOs, held until the shell has its own */
    struct session_run *run; /* the stream's */
    spare_done_fn done;
    void *data;
};

void spare_init(struct agent *a)
{
    a->spare_dir = a->spare_udir = -1;
    if (!a->pid1)
        return;
    /* 0711 whatever the umask: shells open their files by name, and nobody lists them. */
    if ((mkdir(SPARE_DIR, 0711) < 0 && errno != EEXIST) || chmod(SPARE_DIR, 0711) < 0)
        return;
    int dir = open(SPARE_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dir < 0 || !spawn_switches_user()) {
        a->spare_dir = dir;
        return;
    }
    /* The user's files are made with the user's ids (the namespaces backend may not chown,
     * gVisor not a pipe) in a directory of the user's, made the same way while nothing of
     * the user's runs yet: the agent has only just started. */
    struct stat st;
    int r = chmod(SPARE_DIR, 0733) < 0 ? -errno : spawn_as_user();
    if (r == 0) {
        if (mkdirat(dir, SPARE_USER_SUBDIR, 0700) < 0 && errno != EEXIST)
            r = -errno;
        spawn_as_root();
    }
    if (chmod(SPARE_DIR, 0711) < 0)
        r = -errno;
    int udir =
        r == 0 ? openat(dir, SPARE_USER_SUBDIR, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (udir < 0 || fstat(udir, &st) < 0 || st.st_uid != SBX_USER_UID) {
        sbx_closep(&udir);
        sbx_closep(&dir);
        return;
    }
    a->spare_dir = dir;
    a->spare_udir = udir;
}

/* Where the shell's files are made (as the user, for a shell of the user's). */
static int files_dir(const struct spare *sp)
{
    return sp->as_user ? sp->agent->spare_udir : sp->agent->spare_dir;
}

static void unlink_files(struct spare *sp)
{
    static const char *const ext[] = {"c", "o", "e"};
    if (sp->as_user && spawn_as_user() < 0)
        return;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ext); i++) {
        char name[48];
        snprintf(name, sizeof(name), "%llu.%s", sp->seq, ext[i]);
        (void)unlinkat(files_dir(sp), name, 0);
    }
    if (sp->as_user)
        spawn_as_root();
}

static void close_holds(struct spare *sp)
{
    sbx_closep(&sp->out_hold);
    sbx_closep(&sp->err_hold);
    sp->out_hold = sp->err_hold = -1;
}

static void spare_free(struct spare *sp)
{
    if (!sp)
        return;
    if (sp->w)
        loop_watch_del(sp->agent->loop, sp->w);
    close_holds(sp);
    if (sp->seq)
        unlink_files(sp);
    sbx_closep(&sp->ctl_w);
    sbx_closep(&sp->state_r);
    envv_free(&sp->env);
    free(sp->base);
    free(sp->buf);
    free(sp->cwd);
    free(sp);
}

/* Take the shell out of its slot. An idle one is killed alone: background processes
 * left in its group by commands before are not the shell's to end. A busy one is left to
 * its stream, which releases it. */
static void spare_drop(struct agent *a, unsigned i)
{
    struct spare *sp = TAKE_PTR(a->spares[i]);
    if (!sp)
        return;
    sp->retired = true;
    if (sp->busy)
        return;
    if (!sp->reaped)
        (void)kill(sp->pid, SIGKILL);
    spare_free(sp);
}

void spare_drop_all(struct agent *a)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        if (a->spares[i] && !a->spares[i]->busy)
            spare_drop(a, i);
}

unsigned spare_idle(const struct agent *a)
{
    unsigned n = 0;
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        n += a->spares[i] && !a->spares[i]->busy;
    return n;
}

static int spare_slot_of(const struct agent *a, const struct spare *sp)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        if (a->spares[i] == sp)
            return (int)i;
    return -1;
}

/* ---- records ---- */

/* False when the shell is gone (its exit reaches the stream). Into a pipe the shell
 * empties between commands: all of it at once, or the shell is gone. */
static bool answer(struct spare *sp, const char *verdict)
{
    sp->answered = true;
    if (sbx_write_all(sp->ctl_w, verdict, strlen(verdict)) == 0)
        return true;
    sp->retired = true;
    return false;
}

/* A "d" record: the command is done and the shell waits for its answer. */
static void on_done(struct spare *sp, const char *kind, const char *state, size_t state_len,
                    const char *exports, size_t exports_len, const char *trap, size_t trap_len,
                    const char *dump, size_t dump_len)
{
    struct agent *a = sp->agent;
    char *end;
    long st = strtol(kind + 1, &end, 10);
    bool keep = !*end && st >= 0 && st <= 255 && sp->base;
    /* The command replaced the EXIT trap: as in a fresh bash, its own runs at the exit and
     * nothing is saved. */
    keep = keep && strlen(sp->base) == trap_len && !memcmp(sp->base, trap, trap_len);
    if (keep) {
        /* Not saved (too large, the session gone): the shell holds what the session does
         * not, so it must not go on. */
        keep = session_run_save(sp->run, state, state_len);
        size_t flen;
        bool odd = false;
        _cleanup_free_ char *f = shrecord_norm(exports, exports_len, dump, dump_len, &flen, &odd);
        size_t blen = sp->base_len - trap_len - 1;
        keep = keep && !odd && flen == blen && !memcmp(f, sp->base + trap_len + 1, flen);
    }
    close_holds(sp); /* the shell has them open until it leaves the command's redirections */
    if (!keep) {
        sp->retired = true;
        (void)answer(sp, "x\n");
        return; /* its exit comes to the stream */
    }
    struct session *s = session_find(a, sp->sid);
    envv_free(&sp->env);
    envv_copy(&sp->env, &s->env);
    free(sp->cwd);
    sp->cwd = sbx_xstrdup(s->cwd);
    struct stat now;
    if (stat(sp->cwd, &now) == 0) {
        sp->cwd_dev = now.st_dev;
        sp->cwd_ino = now.st_ino;
    } else {
        sp->retired = true; /* it finishes this command, but takes no other */
    }
    if (answer(sp, "k\n")) {
        sp->done_due = true;
        sp->done_status = W_EXITCODE((int)st, 0);
    }
}

static void handle(struct spare *sp, const char *rec, size_t len)
{
    struct shrecord r;
    shrecord_split(rec, len, &r);
    const char *const *f = r.f;
    const size_t *flen = r.len;
    /* cwd and exports, as session_run_save takes them */
    size_t state_len = flen[1] + 1 + flen[2] + 1;
    if (f[0][0] == 'b' && !sp->base) {
        sp->base_len = flen[3] + 1;
        size_t dlen;
        bool odd = false;
        _cleanup_free_ char *d = shrecord_norm(f[2], flen[2], f[4], flen[4], &dlen, &odd);
        sp->base = sbx_xmalloc(sp->base_len + dlen + 1);
        memcpy(sp->base, f[3], flen[3] + 1);
        memcpy(sp->base + sp->base_len, d, dlen);
        sp->base_len += dlen;
        sp->base[sp->base_len] = '\0';
    } else if (f[0][0] == 'd' && sp->busy && !sp->answered) {
        on_done(sp, f[0], f[1], state_len, f[2], flen[2], f[3], flen[3], f[4], flen[4]);
    } else if (f[0][0] == 'x' && !f[0][1] && sp->busy && !sp->answered) {
        /* `exit` in the command: its state is saved, as a fresh bash's trap would. The
         * answer is for a record the command forged: an exiting shell reads none. */
        sp->retired = true;
        (void)session_run_save(sp->run, f[1], state_len);
        (void)answer(sp, "x\n");
        close_holds(sp);
    } else if (sp->busy && !sp->answered) {
        /* The command wrote to the state pipe itself: whatever the shell sends next, it
         * must not wait for an answer that never comes. */
        sp->retired = true;
        (void)answer(sp, "x\n");
        close_holds(sp);
    }
}

static void spare_readable(struct loop *l, int fd, uint32_t events, void *data)
{
    struct spare *sp = data;
    for (;;) {
        char tmp[16384];
        ssize_t n = read(sp->state_r, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0) { /* the shell is gone */
                loop_watch_del(l, sp->w);
                sp->w = NULL;
                sp->retired = true;
            }
            break;
        }
        if (sp->lost)
            continue;
        if (sp->len + (size_t)n > SPARE_RECORD_MAX) {
            sp->lost = sp->retired = true;
            sp->len = sp->scanned = 0;
            if (sp->busy && !sp->answered) {
                /* It will wait for an answer to a record we cannot read: have it exit. */
                (void)answer(sp, "x\n");
                close_holds(sp);
            }
            continue;
        }
        sp->buf = sbx_xrealloc(sp->buf, sp->len + (size_t)n);
        memcpy(sp->buf + sp->len, tmp, (size_t)n);
        sp->len += (size_t)n;
    }
    /* Whole records: five NUL-terminated fields. A record of megabytes comes in many
     * reads; what was looked at is not looked at again. */
    size_t off = 0, end;
    while ((end = shrecord_scan(sp->buf, sp->len, &sp->scanned, &sp->nuls))) {
        handle(sp, sp->buf + off, end - off);
        off = end;
        sp->nuls = 0;
    }
    if (off) {
        memmove(sp->buf, sp->buf + off, sp->len - off);
        sp->len -= off;
        sp->scanned -= off;
    }
    /* Last: the stream may finish at once, release the shell and the refill drop it. */
    if (sp->done_due && sp->done) {
        spare_done_fn done = sp->done;
        sp->done = NULL;
        sp->done_due = false;
        done(sp->data, sp->done_status);
    }
}

/* ---- taking and giving back ---- */

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
    return !sp->busy && !sp->retired && !strcmp(sp->sid, s->id) && sp->gen == s->gen &&
           sp->root == root && env_equal(&sp->env, &s->env) && same_cwd(sp, session_cwd(s));
}

static int spare_slot(const struct agent *a, const char *sid)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        if (a->spares[i] && !strcmp(a->spares[i]->sid, sid))
            return (int)i;
    return -1;
}

/* The command's file and FIFOs, the read ends in fds and the write ends held. */
static int make_files(struct spare *sp, const char *cmd, struct spawn_fds *fds)
{
    int dir = files_dir(sp);
    char name[48];
    snprintf(name, sizeof(name), "%llu.c", sp->seq);
    _cleanup_close_ int c = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (c < 0)
        return -errno;
    int r = sbx_write_all(c, cmd, strlen(cmd) + 1); /* read to its NUL */
    if (r < 0)
        return r;
    int *rd[2] = {&fds->out_r, &fds->err_r}, *hold[2] = {&sp->out_hold, &sp->err_hold};
    static const char ext[2] = {'o', 'e'};
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof(name), "%llu.%c", sp->seq, ext[i]);
        if (mkfifoat(dir, name, 0600) < 0)
            return -errno;
        /* Ours first, without blocking; then a writer of ours, so that the reader sees
         * neither EOF nor a hang-up before the shell has opened its end. Never through a
         * symlink: the user's directory is the user's to change meanwhile. */
        *rd[i] = openat(dir, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
        if (*rd[i] < 0)
            return -errno;
        *hold[i] = openat(dir, name, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
        if (*hold[i] < 0)
            return -errno;
    }
    return 0;
}

bool spare_take(struct agent *a, struct session *s, bool root, const char *cmd, pid_t *pid,
                struct spawn_fds *fds, struct session_run **run, struct spare **out)
{
    int i = spare_slot(a, s->id);
    if (i < 0 || strlen(cmd) > SPARE_CMD_MAX)
        return false;
    struct spare *sp = a->spares[i];
    if (!spare_fits(sp, s, root)) {
        if (!sp->busy) /* from before: the refill after this command starts the right one */
            spare_drop(a, (unsigned)i);
        return false;
    }
    struct spawn_fds f = {-1, -1, -1};
    sp->seq = ++a->spare_seq;
    int r = sp->as_user ? spawn_as_user() : 0;
    if (r == 0) {
        r = make_files(sp, cmd, &f);
        if (sp->as_user)
            spawn_as_root();
    }
    char line[64]; /* the files' path without their extension */
    int n = snprintf(line, sizeof(line), "%s%s/%llu\n", SPARE_DIR,
                     sp->as_user ? "/" SPARE_USER_SUBDIR : "", sp->seq);
    if (r == 0)
        r = sbx_write_all(sp->ctl_w, line, (size_t)n); /* fails only if the shell is gone */
    if (r < 0) {
        sbx_closep(&f.out_r);
        sbx_closep(&f.err_r);
        spare_drop(a, (unsigned)i);
        return false;
    }
    sp->busy = true;
    sp->answered = false;
    sp->run = session_run_resident(a, s);
    a->spare_tick[i] = ++a->spare_clock;
    *pid = sp->pid;
    *fds = f;
    *run = sp->run;
    *out = sp;
    return true;
}

void spare_bind(struct spare *sp, spare_done_fn done, void *data)
{
    sp->done = done;
    sp->data = data;
}

void spare_exited(struct spare *sp)
{
    sp->reaped = true;
    sp->retired = true;
    close_holds(sp);
}

void spare_release(struct agent *a, struct spare *sp, bool lost)
{
    if (lost)
        sp->retired = true;
    sp->busy = false;
    sp->done_due = false;
    sp->run = NULL;
    sp->done = NULL;
    close_holds(sp);
    unlink_files(sp);
    sp->seq = 0;
    if (sp->retired) {
        int i = spare_slot_of(a, sp);
        if (i >= 0)
            a->spares[i] = NULL;
        /* Retired by an answer "x" or its own exit: it is ending (or ended) by itself. */
        spare_free(sp);
    }
}

bool spare_child_exit(struct agent *a, pid_t pid)
{
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++) {
        struct spare *sp = a->spares[i];
        if (sp && sp->pid == pid) {
            sp->reaped = true;
            spare_drop(a, i);
            return true;
        }
    }
    return false;
}

/* ---- starting one ---- */

/* Nothing but the shell in its group: a timeout kills the group, so what a command left
 * there would die with a later one. */
static bool spare_clean(const struct spare *sp)
{
    DIR *d = opendir("/proc");
    if (!d)
        return false;
    bool clean = true;
    unsigned seen = 0;
    struct dirent *de;
    while (clean && (de = readdir(d))) {
        pid_t pid = procstat_pid(de->d_name);
        if (!pid || pid == sp->pid)
            continue;
        if (++seen > SPARE_SCAN_MAX) {
            clean = false;
            break;
        }
        struct procstat ps;
        clean = procstat_read(dirfd(d), de->d_name, &ps) < 0 || ps.pgrp != sp->pid;
    }
    closedir(d);
    return clean;
}

static struct spare *spare_start(struct agent *a, struct session *s)
{
    struct spare *sp = sbx_xcalloc(1, sizeof(*sp));
    sp->agent = a;
    sp->ctl_w = sp->state_r = sp->out_hold = sp->err_hold = -1;
    snprintf(sp->sid, sizeof(sp->sid), "%s", s->id);
    sp->gen = s->gen;
    sp->root = s->root;
    sp->as_user = !s->root && spawn_switches_user();
    sp->cwd = sbx_xstrdup(session_cwd(s));
    envv_copy(&sp->env, &s->env);
    struct stat st;
    int state[2] = {-1, -1}, ctl[2] = {-1, -1};
    struct spawn_fds fds = {-1, -1, -1};
    static const char *const argv[] = {"/bin/bash", "-c", SPARE_SCRIPT, NULL};
    struct spawn_req sr = {.argv = argv, .envp = sp->env.v, .cwd = sp->cwd, .root = sp->root};
    struct sbx_err err = {0};
    int r = stat(sp->cwd, &st) < 0 ? -errno : 0;
    if (r == 0 && (pipe2(state, O_CLOEXEC) < 0 || pipe2(ctl, O_CLOEXEC) < 0))
        r = -errno;
    if (r == 0 && (sbx_set_nonblock(state[0]) < 0 || sbx_set_nonblock(ctl[1]) < 0))
        r = -errno;
    if (r == 0) {
        sr.extra[SPARE_FD_STATE - SPAWN_EXTRA_FD_MIN] = state[1];
        sr.extra[SPARE_FD_CTL - SPAWN_EXTRA_FD_MIN] = ctl[0];
        r = spawn_command(&sr, &sp->pid, &fds, &err);
    }
    sbx_closep(&state[1]);
    sbx_closep(&ctl[0]);
    /* It sends its own output to /dev/null at once. */
    sbx_closep(&fds.out_r);
    sbx_closep(&fds.err_r);
    sp->state_r = state[0];
    sp->ctl_w = ctl[1];
    if (r == 0)
        r = loop_watch_add(a->loop, sp->state_r, EPOLLIN, spare_readable, sp, &sp->w);
    /* Looked at again now the shell is in it: a directory replaced in between is not the
     * one it holds. */
    struct stat after;
    if (r == 0 &&
        (stat(sp->cwd, &after) < 0 || after.st_dev != st.st_dev || after.st_ino != st.st_ino))
        r = -ESTALE;
    sp->cwd_dev = st.st_dev;
    sp->cwd_ino = st.st_ino;
    if (r < 0) {
        if (sp->pid > 0)
            (void)kill(sp->pid, SIGKILL);
        spare_free(sp);
        return NULL;
    }
    return sp;
}

void spare_refill(struct agent *a)
{
    if (!a->spare_for[0] || a->spare_dir < 0)
        return;
    struct session *s = session_find(a, a->spare_for);
    a->spare_for[0] = '\0';
    if (!s)
        return;
    int i = spare_slot(a, s->id);
    if (i >= 0 && a->spares[i]->busy)
        return; /* another command of the session still runs in it */
    if (i >= 0 && spare_fits(a->spares[i], s, s->root) && spare_clean(a->spares[i])) {
        a->spare_tick[i] = ++a->spare_clock;
        return;
    }
    if (i < 0) { /* a free slot, else the one used longest ago that is idle */
        for (unsigned k = 0; k < AGENT_MAX_SPARES; k++) {
            if (!a->spares[k]) {
                i = (int)k;
                break;
            }
            if (!a->spares[k]->busy && (i < 0 || a->spare_tick[k] < a->spare_tick[i]))
                i = (int)k;
        }
        if (i < 0)
            return;
    }
    spare_drop(a, (unsigned)i);
    struct spare *sp = spare_start(a, s);
    if (!sp)
        return;
    a->spares[i] = sp;
    a->spare_tick[i] = ++a->spare_clock;
}
