/* The timer slack of the sandbox's runsc process, stretched while the agent says nothing of
 * the user's runs (src/agent/quiet.h says why; docs/runtime.md, "Idle sandboxes"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "shim.h"

/* Writes ns to /proc/<tid>/timerslack_ns for every thread of pid; the number written. A
 * thread made later takes its maker's value, so a process set whole stays set. */
static int slack_set(pid_t pid, unsigned long long ns, int *failed)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    char val[24];
    int len = snprintf(val, sizeof(val), "%llu", ns);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%.16s/timerslack_ns", de->d_name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0 && write(fd, val, (size_t)len) == len)
            n++;
        else
            (*failed)++; /* a thread that just ended */
        if (fd >= 0)
            close(fd);
    }
    closedir(d);
    return n;
}

static void apply(struct shim *s, bool idle)
{
    /* Only runsc's own process polls; a native container's processes are the user's. */
    if (s->native || s->run_pid <= 0)
        return;
    s->idle = idle;
    int failed = 0;
    int r = slack_set(s->run_pid, idle ? SHIM_IDLE_SLACK_NS : SHIM_BUSY_SLACK_NS, &failed);
    s->idle_flips++;
    if (r < 0 || failed > 0)
        shim_log(s, "timer slack %s: %d threads set, %d not: %s", idle ? "stretched" : "restored",
                 r < 0 ? 0 : r, failed, r < 0 ? strerror(-r) : "threads ended meanwhile");
}

void shim_idle_frame_to_agent(struct shim *s, uint8_t type)
{
    s->to_agent_frames++;
    /* Credit and pings start nothing; everything else may start the user's work. */
    if (s->idle && type != PROTO_WINDOW && type != PROTO_PING && type != PROTO_PONG)
        apply(s, false);
}

void shim_idle_said(struct shim *s, const struct proto_frame *f)
{
    if (f->len != 8 || s->idle)
        return;
    /* Frames handed over after the agent counted may start something: not quiet. */
    if (proto_get_u64(f->payload) == s->to_agent_frames)
        apply(s, true);
}
