/* Under gVisor the sandbox's /proc/meminfo is its own: MemTotal is the limit and
 * MemTotal - MemAvailable what its processes and tmpfs files hold. Elsewhere (the
 * namespaces and local backends) /proc/meminfo is the host's, so the watcher sums the
 * resident sizes of the sandbox's processes instead. */
#include "oomwatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "agent.h"
#include "killlog.h"
#include "procstat.h"

struct oomwatch {
    struct agent *a;
    uint64_t limit;
    uint64_t threshold; /* kill above this */
    bool meminfo;       /* /proc/meminfo describes the sandbox */
    struct loop_timer *t;
    struct killlog kills;
    long long kill_ms; /* the last kill: its memory takes a moment to come back */
    uint64_t kill_used;
};

/* A small /proc file into buf (NUL-terminated); the length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* A "Name:   N kB" field of /proc/meminfo, in bytes; 0 when absent. */
static uint64_t meminfo_field(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p ? strtoull(p + strlen(name), NULL, 10) * 1024 : 0;
}

static bool meminfo_read(uint64_t *total, uint64_t *avail)
{
    char buf[4096];
    if (read_small("/proc/meminfo", buf, sizeof(buf)) <= 0)
        return false;
    *total = meminfo_field(buf, "MemTotal:");
    *avail = meminfo_field(buf, "MemAvailable:");
    return *total > 0;
}

/* A process's resident bytes (0 for a zombie or one that is gone). */
static uint64_t rss_of(pid_t pid)
{
    char path[40], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    if (read_small(path, buf, sizeof(buf)) <= 0)
        return 0;
    unsigned long long size = 0, resident = 0;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static pid_t pgid_of(pid_t pid)
{
    char name[32];
    snprintf(name, sizeof(name), "/proc/%d", (int)pid);
    struct procstat ps;
    return procstat_read(AT_FDCWD, name, &ps) == 0 ? ps.pgrp : 0;
}

/* The largest process but us, and the sum of all (ours included). */
static pid_t largest(uint64_t *victim_rss, uint64_t *sum)
{
    *victim_rss = *sum = 0;
    pid_t best = 0, self = getpid();
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid = procstat_pid(de->d_name);
        if (!pid)
            continue;
        uint64_t rss = rss_of(pid);
        *sum += rss;
        if (pid != self && rss > *victim_rss) {
            *victim_rss = rss;
            best = pid;
        }
    }
    closedir(d);
    return best;
}

/* Use in bytes, or false when it cannot be read. */
static bool usage(struct oomwatch *w, uint64_t *used)
{
    if (w->meminfo) {
        uint64_t total, avail;
        if (!meminfo_read(&total, &avail))
            return false;
        *used = total > avail ? total - avail : 0;
        return true;
    }
    uint64_t rss;
    (void)largest(&rss, used);
    return true;
}

static void poll_cb(struct loop *l, void *data);

/* The wait before the next look, from how far use is from the hot line (oomwatch.h). */
static long long next_poll_ms(const struct oomwatch *w, uint64_t used)
{
    uint64_t hot_line = w->threshold / 3 * 2;
    if (used >= hot_line)
        return OOMWATCH_HOT_POLL_MS;
    uint64_t ms = (hot_line - used) / (OOMWATCH_RATE_BYTES_S / 1000);
    if (ms < OOMWATCH_POLL_MS)
        return OOMWATCH_POLL_MS;
    return ms > OOMWATCH_POLL_MAX_MS ? OOMWATCH_POLL_MAX_MS : (long long)ms;
}

static void arm(struct oomwatch *w, long long ms)
{
    w->t = loop_timer_add(w->a->loop, ms, poll_cb, w);
}

static void poll_cb(struct loop *l, void *data)
{
    struct oomwatch *w = data;
    w->t = NULL;
    uint64_t used = 0;
    if (w->limit == 0 || !usage(w, &used)) {
        arm(w, OOMWATCH_POLL_MS);
        return;
    }
    uint64_t limit = w->limit;
    long long now = sbx_now_ms();
    bool settling = w->kill_ms && now - w->kill_ms < OOMWATCH_SETTLE_MS &&
                    used <= w->kill_used + limit / OOMWATCH_SETTLE_GROWTH;
    if (used >= w->threshold && !settling) {
        uint64_t rss, sum;
        pid_t pid = largest(&rss, &sum);
        if (pid > 0) {
            pid_t pgid = pgid_of(pid);
            if (kill(pid, SIGKILL) == 0) {
                killlog_add(&w->kills, pid, pgid, now);
                w->kill_ms = now;
                w->kill_used = used;
                dprintf(2,
                        "sbx-agent: memory: %llu of %llu MiB in use: killed pid %d "
                        "(group %d, %llu MiB resident)\n",
                        (unsigned long long)(used >> 20), (unsigned long long)(limit >> 20),
                        (int)pid, (int)pgid, (unsigned long long)(rss >> 20));
            }
        }
    }
    arm(w, next_poll_ms(w, used));
}

void oomwatch_set_limit(struct agent *a, uint64_t limit_bytes)
{
    if (!a->oom) {
        if (!limit_bytes)
            return;
        a->oom = sbx_xcalloc(1, sizeof(*a->oom));
        a->oom->a = a;
        arm(a->oom, 0);
    }
    struct oomwatch *w = a->oom;
    w->limit = limit_bytes;
    uint64_t total = 0, avail = 0;
    /* gVisor sizes its memory from the cgroup limit (MemTotal = limit); a host's
     * meminfo is far larger. */
    w->meminfo = meminfo_read(&total, &avail) && total <= limit_bytes + limit_bytes / 16;
    if (w->meminfo && total < limit_bytes)
        w->limit = total;
    uint64_t reserve = w->limit / 100 * (100 - OOMWATCH_PERCENT);
    if (reserve < OOMWATCH_RESERVE_MIN)
        reserve = OOMWATCH_RESERVE_MIN;
    if (reserve > w->limit / 2)
        reserve = w->limit / 2;
    w->threshold = w->limit - reserve;
}

bool oomwatch_claim(struct agent *a, pid_t pgid, pid_t pid, long long since_ms)
{
    return a->oom && killlog_claim(&a->oom->kills, pgid, pid, since_ms);
}
