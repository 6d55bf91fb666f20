#include "shim_idle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* Writes ns to /proc/<tid>/timerslack_ns for every thread of pid; the number written or
 * -errno. A thread made later takes its maker's value, so a process set whole stays set; a
 * thread that ends meanwhile is no failure. */
static int slack_set(pid_t pid, unsigned long long ns)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    char val[24];
    int len = snprintf(val, sizeof(val), "%llu", ns);
    int n = 0, r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%.16s/timerslack_ns", de->d_name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT && errno != ESRCH)
                r = -errno;
            continue;
        }
        if (write(fd, val, (size_t)len) == len)
            n++;
        else if (errno != ESRCH)
            r = -errno;
        close(fd);
    }
    closedir(d);
    return r < 0 ? r : n;
}

static int apply(struct shim_idle *st, pid_t sentry, bool idle)
{
    if (sentry <= 0)
        return 0;
    st->idle = idle;
    return slack_set(sentry, idle ? SHIM_IDLE_SLACK_NS : SHIM_BUSY_SLACK_NS);
}

int shim_idle_frame_to_agent(struct shim_idle *st, pid_t sentry, uint8_t type)
{
    st->to_agent_frames++;
    /* Credit and pings start nothing; everything else may start the user's work. */
    if (st->idle && type != PROTO_WINDOW && type != PROTO_PING && type != PROTO_PONG)
        return apply(st, sentry, false);
    return 0;
}

int shim_idle_said(struct shim_idle *st, pid_t sentry, const struct proto_frame *f)
{
    if (f->len != 8 || st->idle)
        return 0;
    /* Frames queued after the agent counted may start something: not quiet. */
    if (proto_get_u64(f->payload) != st->to_agent_frames)
        return 0;
    return apply(st, sentry, true);
}
