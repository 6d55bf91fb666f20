#include "procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

pid_t procstat_pid(const char *name)
{
    if (!*name)
        return 0;
    for (const char *p = name; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    long pid = strtol(name, NULL, 10);
    return pid > 0 ? (pid_t)pid : 0;
}

int procstat_read(int dirfd, const char *name, struct procstat *out)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "%s/stat", name);
    _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len;
    do
        len = read(fd, buf, sizeof(buf) - 1);
    while (len < 0 && errno == EINTR);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    /* "pid (comm) state ppid pgrp session ...": comm may hold anything, ')' too, so the
     * fields start after the last one. */
    const char *p = strrchr(buf, ')');
    int ppid, pgrp, sid;
    char state;
    if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4)
        return -1;
    *out = (struct procstat){.state = state, .ppid = ppid, .pgrp = pgrp, .sid = sid};
    return 0;
}
