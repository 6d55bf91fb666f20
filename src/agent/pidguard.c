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
#include "killlog.h"
#include "spawn.h"

/* Distinct sessions one scan tells apart; a bomb that makes more (setsid in every child)
 * is found again at the next strike, a few sessions at a time. */
#define PIDGUARD_SESSIONS_MAX 1024
/* Sweeps of one session's members; a sweep finds the ones forked during the one before. */
#define PIDGUARD_KILL_ROUNDS 32
/* Sweeps stopping every user process before all are killed (see kill_everything). */
#define PIDGUARD_FREEZE_ROUNDS 64

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
    struct tally tally[PIDGUARD_SESSIONS_MAX]; /* scan's */
};

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

/* The session of the live (not zombie) user process /proc/<name>, and its state letter;
 * 0 for anything else. */
static pid_t user_session_state(int procfd, const char *name, char *state_out)
{
    struct stat st;
    if (fstatat(procfd, name, &st, 0) < 0 || st.st_uid != SBX_USER_UID)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "%s/stat", name);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[512];
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = '\0';
    /* The command name may hold anything, ')' too: the fields start after the last one. */
    const char *p = strrchr(buf, ')');
    char state;
    int ppid, pgrp, sid;
    if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4 || state == 'Z')
        return 0;
    *state_out = state;
    return sid > 0 ? sid : 0;
}

static pid_t user_session(int procfd, const char *name)
{
    char state;
    return user_session_state(procfd, name, &state);
}

/* Count the user's processes and find the session holding most of them (*top_n). */
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
        if (!is_pid(de->d_name))
            continue;
        pid_t sid = user_session(dirfd(d), de->d_name);
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

/* Send signo to every user process of session sid (0: of any session), sweep after sweep
 * until one finds none left to signal (each sweep finds the ones forked during the one
 * before) or rounds run out; a process already stopped needs no second SIGSTOP. Returns
 * how many were hit. */
static unsigned long signal_sweeps(pid_t sid, int signo, int rounds)
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
            pid_t in = is_pid(de->d_name) ? user_session_state(dirfd(d), de->d_name, &state) : 0;
            if (!in || (sid && in != sid) || (signo == SIGSTOP && (state == 'T' || state == 't')))
                continue;
            if (kill((pid_t)strtol(de->d_name, NULL, 10), signo) == 0)
                n++;
        }
        closedir(d);
        hit += n;
        if (n == 0)
            break;
    }
    return hit;
}

static unsigned long kill_session(pid_t sid)
{
    /* The leader's group first, in one call: a shell's background jobs stay in it. */
    (void)kill(-sid, SIGKILL);
    return signal_sweeps(sid, SIGKILL, PIDGUARD_KILL_ROUNDS);
}

/* A bomb that calls setsid in every child holds no session bigger than a process or two,
 * and its tree splits as members die (their children go to the agent), so neither a
 * session nor a tree names it. Stopped processes cannot fork: SIGSTOP every user process
 * until a sweep finds none still running, then SIGKILL them all. Everything the user runs
 * in the sandbox ends; at the limit, with no session to blame, nothing narrower holds. */
static unsigned long kill_everything(void)
{
    (void)signal_sweeps(0, SIGSTOP, PIDGUARD_FREEZE_ROUNDS);
    return signal_sweeps(0, SIGKILL, PIDGUARD_KILL_ROUNDS);
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
        pid_t top;
        unsigned top_n;
        unsigned long total = scan(g, &top, &top_n);
        if (total >= g->near && top > 0 && top_n * PIDGUARD_DOMINANT_DIV >= total) {
            unsigned long hit = kill_session(top);
            killlog_add(&g->kills, 0, top, sbx_now_ms());
            dprintf(2, "sbx-agent: process limit: killed session %d (%lu processes)\n", (int)top,
                    hit);
        } else if (total >= g->near) {
            unsigned long hit = kill_everything();
            g->swept_ms = sbx_now_ms();
            dprintf(2,
                    "sbx-agent: process limit: no session holds most of %lu processes (the "
                    "biggest %u): killed every user process (%lu)\n",
                    total, top_n, hit);
        }
    }
    (void)loop_timer_add(l, PIDGUARD_TICK_MS, tick, data);
}

bool pidguard_claim(struct agent *a, pid_t sid, long long since_ms, bool sigkilled)
{
    struct pidguard *g = a->guard;
    if (!g)
        return false;
    bool session = killlog_claim(&g->kills, sid, 0, since_ms);
    return session || (sigkilled && g->swept_ms && g->swept_ms >= since_ms);
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
