#include "pidguard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/sbxuser.h"
#include "../common/util.h"
#include "agent.h"
#include "killlog.h"
#include "procstat.h"
#include "spare.h"
#include "spawn.h"

/* Distinct sessions one scan tells apart; a bomb that makes more (setsid in every child)
 * is found again at the next strike, a few sessions at a time. */
#define PIDGUARD_SESSIONS_MAX 1024
/* Sweeps of one session's members; a sweep finds the ones forked during the one before. */
#define PIDGUARD_KILL_ROUNDS 32
/* How long the guard counts without stopping everything after a stop that found the user
 * under the limit (strike). */
#define PIDGUARD_FREEZE_BACKOFF_MS 2000
/* Rounds of kill(-1) stopping every user process before the guard looks (strike). */
/* The agent's children a strike keeps track of: one per stream, at most. */
#define PIDGUARD_LEADERS_MAX 256
#define PIDGUARD_FREEZE_ROUNDS 16

struct tally {
    pid_t sid;
    unsigned n;
};

/* The agent's guard (a->guard), made by pidguard_start when there is a limit to hold. */
struct pidguard {
    unsigned long near; /* the user's processes at or above this: at the limit */
    unsigned strikes;
    bool asleep;          /* no look scheduled: nothing ran but the agent and its idle spares */
    struct killlog kills; /* the sessions it killed, by sid */
    long long swept_ms;   /* when it last killed every user process (0: never) */
    long long thaw_ms;    /* no stopping everything before this: the last stop found no bomb */
    struct tally tally[PIDGUARD_SESSIONS_MAX]; /* scan's */
};

/* Every process in the sandbox, the agent's own included: cheap (one directory read). */
static unsigned long count_all(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    unsigned long n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += procstat_pid(de->d_name) > 0;
    closedir(d);
    return n;
}

/* The session of the user process /proc/<name> and its state letter; 0 for anything else.
 * A zombie keeps its session, and its place under the limit until it is reaped. */
static pid_t user_session_state(int procfd, const char *name, char *state_out)
{
    struct stat st;
    if (fstatat(procfd, name, &st, 0) < 0 || st.st_uid != SBX_USER_UID)
        return 0;
    struct procstat ps;
    if (procstat_read(procfd, name, &ps) < 0)
        return 0;
    *state_out = ps.state;
    return ps.sid > 0 ? ps.sid : 0;
}

/* Find the session holding most of the user's processes (*top, with *top_n of them);
 * returns how many the user has. Zombies count: they hold their place under the limit, and
 * the session that made them is the bomb. */
static unsigned long scan(struct pidguard *g, pid_t *top, unsigned *top_n)
{
    struct tally *t = g->tally;
    unsigned nt = 0;
    unsigned long total = 0, seen = 0;
    *top = 0;
    *top_n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) && seen++ < PIDGUARD_SCAN_MAX) {
        if (!procstat_pid(de->d_name))
            continue;
        char state;
        pid_t sid = user_session_state(dirfd(d), de->d_name, &state);
        if (!sid)
            continue;
        total++;
        unsigned i = 0;
        while (i < nt && t[i].sid != sid)
            i++;
        if (i == nt) {
            if (nt == PIDGUARD_SESSIONS_MAX)
                continue;
            t[nt++] = (struct tally){sid, 0};
        }
        t[i].n++;
    }
    closedir(d);
    unsigned best = 0;
    for (unsigned i = 0; i < nt; i++)
        if (t[i].n > best) {
            best = t[i].n;
            *top = t[i].sid;
        }
    *top_n = best;
    return total;
}

/* SIGKILL every live user process of session sid, sweep after sweep until one finds none
 * left (each sweep finds the ones forked during the one before; none when all are stopped)
 * or rounds run out. Returns how many were hit. */
static unsigned long kill_sweeps(pid_t sid, int rounds)
{
    unsigned long hit = 0;
    for (int round = 0; round < rounds; round++) {
        DIR *d = opendir("/proc");
        if (!d)
            break;
        unsigned long n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            char state = 0;
            pid_t in =
                procstat_pid(de->d_name) ? user_session_state(dirfd(d), de->d_name, &state) : 0;
            if (in != sid || state == 'Z')
                continue;
            if (kill((pid_t)strtol(de->d_name, NULL, 10), SIGKILL) == 0)
                n++;
        }
        closedir(d);
        hit += n;
        if (n == 0)
            break;
    }
    return hit;
}

/* The agent's live user children: the commands whose exit status is reported (an exec's
 * main process, a background process, a terminal's shell, the kernel), each its session's
 * leader. Returns how many (at most max). */
static unsigned live_leaders(pid_t *out, unsigned max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t self = getpid();
    unsigned n = 0;
    struct dirent *de;
    while (n < max && (de = readdir(d))) {
        char state = 0;
        struct procstat ps;
        pid_t pid = procstat_pid(de->d_name);
        if (pid > 0 && user_session_state(dirfd(d), de->d_name, &state) == pid && state != 'Z' &&
            procstat_read(dirfd(d), de->d_name, &ps) == 0 && ps.ppid == self)
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

/* Whether process pid has exited and waits to be reaped (the agent reaps only once the
 * strike is over, so its pid is still its own). */
static bool is_zombie(pid_t pid)
{
    char name[32];
    struct procstat ps;
    snprintf(name, sizeof(name), "/proc/%d", (int)pid);
    return procstat_read(AT_FDCWD, name, &ps) == 0 && ps.state == 'Z';
}

static unsigned long kill_session(pid_t sid)
{
    /* Its leader first (see kill_leaders), then the leader's group in one call (a shell's
     * background jobs stay in it), then sweeps for the rest. */
    char name[32], state = 0;
    snprintf(name, sizeof(name), "/proc/%d", (int)sid);
    if (user_session_state(AT_FDCWD, name, &state) == sid && state != 'Z')
        (void)kill(sid, SIGKILL); /* still the leader: a pid can be reused */
    (void)kill(-sid, SIGKILL);
    return kill_sweeps(sid, PIDGUARD_KILL_ROUNDS);
}

/* The agent and its idle resident shells, each blocked until the agent hands it a
 * command: what a sandbox runs when nobody can be forking. */
static unsigned long agent_own(const struct agent *a)
{
    return 1 + spare_idle(a);
}

/* At the limit. A bomb keeps both cores busy, and under ptrace each syscall of the agent's
 * then waits its turn: reading the session of 30 processes took 2-5 s, and the bomb went on
 * meanwhile. So first every user process is stopped (kill(-1) as the user, a few calls
 * whatever the count; stopped processes cannot fork), then the sessions are counted at
 * leisure, the offender killed and the rest continued. The one that holds most of them is
 * the bomb; when none does (setsid in every child, so its tree splits as members die and
 * neither a session nor a tree names it), everything of the user's is killed: at the limit,
 * with no session to blame, nothing narrower holds. */
static void strike(struct pidguard *g)
{
    /* The count that got us here includes root's processes (commands run as root, where
     * the operator allows them), which the limit does not hold; when stopping everything
     * found the user under the limit, the next looks for a while count without it. */
    long long now = sbx_now_ms();
    pid_t leaders[PIDGUARD_LEADERS_MAX];
    unsigned nleaders = live_leaders(leaders, PIDGUARD_LEADERS_MAX);
    int frozen =
        now < g->thaw_ms ? -EAGAIN : spawn_signal_user_all(SIGSTOP, PIDGUARD_FREEZE_ROUNDS);
    pid_t top;
    unsigned top_n;
    unsigned long total = scan(g, &top, &top_n);
    if (frozen == 0 && total < g->near)
        g->thaw_ms = now + PIDGUARD_FREEZE_BACKOFF_MS;
    if (total >= g->near && top > 0 && top_n * PIDGUARD_DOMINANT_DIV >= total) {
        unsigned long hit = kill_session(top);
        killlog_add(&g->kills, 0, top, sbx_now_ms());
        dprintf(2, "sbx-agent: process limit: killed session %d (%lu processes)\n", (int)top, hit);
    } else if (total >= g->near) {
        /* Not stopped yet when this look came in a back-off: stopped first all the same. */
        int r = frozen == 0 ? 0 : spawn_signal_user_all(SIGSTOP, PIDGUARD_FREEZE_ROUNDS);
        if (r == 0) {
            /* The leaders first: a member killed before its leader would hang the
             * leader up (see below), and a leader's status is what its command reports. */
            for (unsigned i = 0; i < nleaders; i++)
                (void)kill(leaders[i], SIGKILL);
            r = spawn_signal_user_all(SIGKILL, PIDGUARD_KILL_ROUNDS);
        }
        g->swept_ms = sbx_now_ms();
        if (r < 0)
            dprintf(2, "sbx-agent: process limit: killing every user process: %s\n", strerror(-r));
        else
            dprintf(2,
                    "sbx-agent: process limit: no session holds most of %lu processes (the "
                    "biggest %u): killed every user process\n",
                    total, top_n);
    }
    /* gVisor (runsc 20240729) sends SIGHUP and SIGCONT to a process group with a stopped
     * member whenever any member leaves it (exits, or calls setsid) while no member's parent
     * is in another group of the session; Linux does so only when the group becomes
     * orphaned. A command's group never has such a parent (the agent is outside its
     * session), so while the guard holds everything stopped, one child forked between two
     * rounds of SIGSTOP that calls setsid hangs up its whole group: the leader dies of
     * SIGHUP before the guard's SIGKILL (once in 15 setsid bombs, three in eleven on a
     * loaded host). Nothing of the user's can act while stopped, so a leader that died
     * during the stop died of it: the guard claims it, as its own kill. */
    long long end = sbx_now_ms();
    for (unsigned i = 0; frozen == 0 && i < nleaders; i++)
        if (is_zombie(leaders[i]))
            killlog_add(&g->kills, leaders[i], 0, end);
    if (frozen == 0 && spawn_signal_user_all(SIGCONT, 1) < 0)
        dprintf(2, "sbx-agent: process limit: continuing the user's processes failed\n");
}

bool pidguard_nothing_runs(const struct agent *a)
{
    return count_all() <= agent_own(a);
}

static void tick(struct loop *l, void *data)
{
    struct agent *a = data;
    struct pidguard *g = a->guard;
    unsigned long n = count_all();
    if (n <= agent_own(a)) {
        /* Nothing of the user's runs, so nothing forks until a request starts something,
         * and every request wakes the guard (pidguard_wake): an idle sandbox costs no
         * looks. */
        g->strikes = 0;
        g->asleep = true;
        return;
    }
    if (n < g->near) {
        g->strikes = 0;
    } else if (++g->strikes >= PIDGUARD_STRIKES) {
        g->strikes = 0;
        strike(g);
    }
    (void)loop_timer_add(l, PIDGUARD_TICK_MS, tick, data);
}

bool pidguard_claim(struct agent *a, pid_t sid, long long since_ms, int *status)
{
    struct pidguard *g = a->guard;
    if (!g)
        return false;
    bool signaled = WIFSIGNALED(*status), sigkilled = signaled && WTERMSIG(*status) == SIGKILL;
    bool ours = killlog_claim(&g->kills, sid, sid, since_ms) ||
                (sigkilled && g->swept_ms && g->swept_ms >= since_ms);
    /* Hung up by gVisor while the guard held it stopped (strike): the guard's kill. */
    if (ours && signaled && !sigkilled)
        *status = SIGKILL;
    return ours;
}

void pidguard_wake(struct agent *a)
{
    struct pidguard *g = a->guard;
    if (!g || !g->asleep)
        return;
    g->asleep = false;
    (void)loop_timer_add(a->loop, PIDGUARD_TICK_MS, tick, a);
}

void pidguard_start(struct agent *a)
{
    struct rlimit rl;
    if (!spawn_switches_user() || getrlimit(RLIMIT_NPROC, &rl) < 0 ||
        rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < 2)
        return;
    unsigned long limit = (unsigned long)rl.rlim_cur;
    struct pidguard *g = sbx_xcalloc(1, sizeof(*g));
    g->near = limit - (limit / PIDGUARD_SLACK ? limit / PIDGUARD_SLACK : 1);
    a->guard = g;
    (void)loop_timer_add(a->loop, PIDGUARD_TICK_MS, tick, a);
}
