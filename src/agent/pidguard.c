#include "pidguard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/sbxuser.h"
#include "../common/util.h"
#include "agent.h"
#include "spawn.h"

/* Distinct sessions, and trees, one scan tells apart. */
#define PIDGUARD_SESSIONS_MAX 1024
/* Sweeps of one session's or tree's members; a sweep finds the ones forked during the one
 * before. */
#define PIDGUARD_KILL_ROUNDS 32

/* One guard per agent process, like the agent itself. */
static struct {
    unsigned long near; /* the user's processes at or above this: at the limit */
    unsigned strikes;
    bool on;     /* pidguard_start found a limit to hold */
    bool asleep; /* no look scheduled: nothing ran but the agent and its idle spares */
    struct {
        pid_t sid;
        long long ms;
    } kills[PIDGUARD_KILLS_MAX]; /* oldest first; the oldest goes when full */
    unsigned nkills;
} guard;

static bool is_pid(const char *name)
{
    return name[0] >= '1' && name[0] <= '9';
}

/* Every process in the sandbox, the agent's own included: cheap (one directory read). */
static unsigned long count_all(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    unsigned long n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += is_pid(de->d_name);
    closedir(d);
    return n;
}

/* A live (not zombie) process of the user's, from /proc/<pid>/stat. */
struct uproc {
    pid_t pid, ppid, sid;
};

/* Fills *u from /proc/<name> when that is a live user process. */
static bool user_proc(int procfd, const char *name, struct uproc *u)
{
    struct stat st;
    if (fstatat(procfd, name, &st, 0) < 0 || st.st_uid != SBX_USER_UID)
        return false;
    char path[64];
    snprintf(path, sizeof(path), "%s/stat", name);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[512];
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return false;
    buf[len] = '\0';
    /* The command name may hold anything, ')' too: the fields start after the last one. */
    const char *p = strrchr(buf, ')');
    char state;
    int ppid, pgrp, sid;
    if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4 || state == 'Z' ||
        sid <= 0)
        return false;
    *u = (struct uproc){(pid_t)strtol(name, NULL, 10), ppid, sid};
    return true;
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct uproc *)a)->pid, y = ((const struct uproc *)b)->pid;
    return (x > y) - (x < y);
}

/* The user's processes, sorted by pid; their number. One table per agent, like the guard. */
static struct uproc table[PIDGUARD_SCAN_MAX];

static unsigned read_table(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    unsigned n = 0, seen = 0;
    struct dirent *de;
    while ((de = readdir(d)) && seen++ < PIDGUARD_SCAN_MAX)
        if (is_pid(de->d_name) && user_proc(dirfd(d), de->d_name, &table[n]))
            n++;
    closedir(d);
    qsort(table, n, sizeof(table[0]), by_pid);
    return n;
}

static const struct uproc *find(unsigned n, pid_t pid)
{
    struct uproc key = {.pid = pid};
    return bsearch(&key, table, n, sizeof(table[0]), by_pid);
}

/* The topmost user process above u: the command the agent started, while the chain of
 * parents is whole (a process whose parent died hangs from the agent, PID 1, and is its
 * own top). A fork bomb that calls setsid in every child is one tree of many sessions. */
static pid_t tree_top(unsigned n, const struct uproc *u)
{
    for (unsigned depth = 0; depth < n; depth++) {
        const struct uproc *parent = find(n, u->ppid);
        if (!parent)
            break;
        u = parent;
    }
    return u->pid;
}

struct tally {
    pid_t key;
    unsigned n;
};

static void count(struct tally *t, unsigned *nt, pid_t key)
{
    unsigned i = 0;
    while (i < *nt && t[i].key != key)
        i++;
    if (i == *nt) {
        if (*nt == PIDGUARD_SESSIONS_MAX)
            return;
        t[(*nt)++] = (struct tally){key, 0};
    }
    t[i].n++;
}

static struct tally biggest(const struct tally *t, unsigned nt)
{
    struct tally best = {0, 0};
    for (unsigned i = 0; i < nt; i++)
        if (t[i].n > best.n)
            best = t[i];
    return best;
}

/* The user's processes, and the session and the tree holding most of them. */
static unsigned scan(struct tally *session, struct tally *tree)
{
    static struct tally ts[PIDGUARD_SESSIONS_MAX], tt[PIDGUARD_SESSIONS_MAX];
    unsigned ns = 0, nt = 0, n = read_table();
    for (unsigned i = 0; i < n; i++) {
        count(ts, &ns, table[i].sid);
        count(tt, &nt, tree_top(n, &table[i]));
    }
    *session = biggest(ts, ns);
    *tree = biggest(tt, nt);
    return n;
}

/* SIGKILL every user process of session sid; returns how many were hit. */
static unsigned long kill_session(pid_t sid)
{
    /* The leader's group first, in one call: a shell's background jobs stay in it. */
    (void)kill(-sid, SIGKILL);
    unsigned long hit = 0;
    for (int round = 0; round < PIDGUARD_KILL_ROUNDS; round++) {
        unsigned n = read_table(), k = 0;
        for (unsigned i = 0; i < n; i++)
            if (table[i].sid == sid && kill(table[i].pid, SIGKILL) == 0)
                k++;
        hit += k;
        if (k == 0)
            break;
    }
    return hit;
}

/* SIGKILL the tree under top. Its members are stopped first, as they are found, so that
 * none forks again or dies and leaves its children to the agent (out of the tree) before
 * the last one is found. Returns how many were hit. */
static unsigned long kill_tree(pid_t top)
{
    static pid_t stopped[PIDGUARD_SCAN_MAX];
    unsigned ns = 0;
    for (int round = 0; round < PIDGUARD_KILL_ROUNDS; round++) {
        unsigned n = read_table(), fresh = 0;
        for (unsigned i = 0; i < n && ns < PIDGUARD_SCAN_MAX; i++) {
            bool seen = false;
            for (unsigned j = 0; j < ns && !seen; j++)
                seen = stopped[j] == table[i].pid;
            if (!seen && tree_top(n, &table[i]) == top && kill(table[i].pid, SIGSTOP) == 0) {
                stopped[ns++] = table[i].pid;
                fresh++;
            }
        }
        if (fresh == 0)
            break;
    }
    unsigned long hit = 0;
    for (unsigned j = 0; j < ns; j++)
        hit += kill(stopped[j], SIGKILL) == 0;
    return hit;
}

/* The agent and the spare shells it holds, each blocked until the agent hands it a
 * command: what a sandbox runs when nobody can be forking. */
static unsigned long agent_own(const struct agent *a)
{
    unsigned long n = 1;
    for (unsigned i = 0; i < AGENT_MAX_SPARES; i++)
        n += a->spares[i] != NULL;
    return n;
}

static void tick(struct loop *l, void *data)
{
    struct agent *a = data;
    unsigned long n = count_all();
    if (n <= agent_own(a)) {
        /* Nothing of the user's runs, so nothing forks until a request starts something,
         * and every request wakes the guard (pidguard_wake): an idle sandbox costs no
         * looks. */
        guard.strikes = 0;
        guard.asleep = true;
        return;
    }
    if (n < guard.near) {
        guard.strikes = 0;
    } else if (++guard.strikes >= PIDGUARD_STRIKES) {
        guard.strikes = 0;
        struct tally session, tree;
        unsigned users = scan(&session, &tree);
        if (users >= guard.near && session.n > 0) {
            /* The bigger of the two is the bomb: one session (the usual bomb, whose
             * processes the agent may have inherited), or one tree spread over sessions. */
            bool by_tree = tree.n > session.n;
            pid_t sid = session.key;
            if (by_tree) {
                const struct uproc *top = find(users, tree.key);
                sid = top ? top->sid : 0;
            }
            unsigned long hit = by_tree ? kill_tree(tree.key) : kill_session(session.key);
            dprintf(2, "sbx-agent: process limit: killed %s %d (%lu processes)\n",
                    by_tree ? "the tree under" : "session", by_tree ? (int)tree.key : (int)sid,
                    hit);
            if (sid > 0) {
                if (guard.nkills == PIDGUARD_KILLS_MAX)
                    memmove(guard.kills, guard.kills + 1,
                            --guard.nkills * sizeof(guard.kills[0]));
                guard.kills[guard.nkills].sid = sid;
                guard.kills[guard.nkills++].ms = sbx_now_ms();
            }
        }
    }
    (void)loop_timer_add(l, PIDGUARD_TICK_MS, tick, data);
}

bool pidguard_claim(pid_t sid, long long since_ms)
{
    bool found = false;
    for (unsigned i = 0; i < guard.nkills;) {
        if (guard.kills[i].sid == sid) {
            found |= guard.kills[i].ms >= since_ms;
            memmove(guard.kills + i, guard.kills + i + 1,
                    (guard.nkills - i - 1) * sizeof(guard.kills[0]));
            guard.nkills--;
        } else {
            i++;
        }
    }
    return found;
}

void pidguard_wake(struct agent *a)
{
    if (!guard.on || !guard.asleep)
        return;
    guard.asleep = false;
    (void)loop_timer_add(a->loop, PIDGUARD_TICK_MS, tick, a);
}

void pidguard_start(struct agent *a)
{
    struct rlimit rl;
    if (!spawn_switches_user() || getrlimit(RLIMIT_NPROC, &rl) < 0 ||
        rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < 2)
        return;
    unsigned long limit = (unsigned long)rl.rlim_cur;
    guard.near = limit - (limit / PIDGUARD_SLACK ? limit / PIDGUARD_SLACK : 1);
    guard.on = true;
    (void)loop_timer_add(a->loop, PIDGUARD_TICK_MS, tick, a);
}
