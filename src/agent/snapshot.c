#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "conn.h"
#include "egress.h"
#include "spare.h"

/* One agent per process: the parked fds are the process's own. */
static struct {
    int fd;
    struct sockaddr_storage addr;
    socklen_t len;
} parked[SNAPSHOT_PARKED_MAX];
static int nparked;

static int sock_opt(int fd, int opt)
{
    int v = -1;
    socklen_t len = sizeof(v);
    return getsockopt(fd, SOL_SOCKET, opt, &v, &len) < 0 ? -1 : v;
}

/* Any inet socket left in the sandbox? /proc/net lists them all, whichever process
 * holds them. */
static int foreign_socket(struct sbx_err *err)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp",
                                         "/proc/net/udp6"};
    for (size_t t = 0; t < SBX_ARRAY_SIZE(tables); t++) {
        _cleanup_fclose_ FILE *f = fopen(tables[t], "re");
        if (!f)
            continue;
        char line[512];
        if (!fgets(line, sizeof(line), f)) /* the header */
            continue;
        while (fgets(line, sizeof(line), f)) {
            char local[64], state[8];
            /* sl local_address rem_address st ... */
            if (sscanf(line, " %*s %63s %*s %7s", local, state) != 2)
                continue;
            const char *port = strrchr(local, ':');
            if (!strcmp(state, "0A")) /* TCP_LISTEN */
                return sbx_err_set(err, EBUSY, "snapshot_unsupported",
                                   "a process in the sandbox listens on TCP port %ld, which "
                                   "gVisor cannot checkpoint: stop that server and try again",
                                   port ? strtol(port + 1, NULL, 16) : 0L);
            return sbx_err_set(err, EBUSY, "snapshot_unsupported",
                               "a process in the sandbox holds a network socket (%s port %ld, "
                               "state %s), which gVisor cannot checkpoint: end it and try again",
                               strstr(tables[t], "udp") ? "UDP" : "TCP",
                               port ? strtol(port + 1, NULL, 16) : 0L, state);
        }
    }
    return 0;
}

static unsigned inet_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return 0;
}

/* One of the agent's own connections blocks the checkpoint: say which kind, since the
 * cure differs (an egress connection is the sandbox's own, a preview one a browser's). */
static int open_connection_error(int fd, struct sbx_err *err)
{
    struct sockaddr_storage local, peer;
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    bool named = getsockname(fd, (struct sockaddr *)&local, &ll) == 0 &&
                 getpeername(fd, (struct sockaddr *)&peer, &pl) == 0;
    if (named && inet_port(&local) == EGRESS_PORT)
        return sbx_err_set(err, EBUSY, "snapshot_unsupported",
                           "an egress connection (a process in the sandbox talking through "
                           "the proxy) is open; try again when it has ended");
    if (named)
        return sbx_err_set(err, EBUSY, "snapshot_unsupported",
                           "an incoming preview connection to port %u is open (a browser or "
                           "client on the preview link); try again when it has closed",
                           inet_port(&peer));
    return sbx_err_set(err, EBUSY, "snapshot_unsupported",
                       "a connection of the agent is open; try again when it has ended");
}

/* Close a listener, keeping its fd number (on /dev/null) and its address: a restored
 * listening endpoint does not work again in gVisor, so a new one takes its place. */
static int park(struct agent *a, int fd)
{
    int i = nparked;
    parked[i].len = sizeof(parked[i].addr);
    if (getsockname(fd, (struct sockaddr *)&parked[i].addr, &parked[i].len) < 0)
        return -errno;
    _cleanup_close_ int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul < 0)
        return -errno;
    int r = loop_fd_park(a->loop, fd);
    if (r < 0)
        return r;
    if (dup3(nul, fd, O_CLOEXEC) < 0) {
        r = -errno;
        (void)loop_fd_unpark(a->loop, fd);
        return r;
    }
    parked[i].fd = fd;
    nparked++;
    return 0;
}

int snapshot_prepare_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    (void)snapshot_relisten(a); /* a prepare whose checkpoint never came */
    spare_drop_all(a);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return sbx_err_sys(err, errno, "listing /proc/self/fd");
    int self = dirfd(d);
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d))) {
        char *end;
        long fd = strtol(de->d_name, &end, 10);
        if (*end || end == de->d_name || fd == self || fd < 3)
            continue;
        int domain = sock_opt((int)fd, SO_DOMAIN);
        if (domain != AF_INET && domain != AF_INET6)
            continue;
        if (sock_opt((int)fd, SO_ACCEPTCONN) != 1) {
            r = open_connection_error((int)fd, err);
            break;
        }
        if (nparked == SNAPSHOT_PARKED_MAX) {
            r = sbx_err_set(err, EBUSY, "snapshot_unsupported",
                            "more than %d listening sockets are open in the agent",
                            SNAPSHOT_PARKED_MAX);
            break;
        }
        if ((r = park(a, (int)fd)) < 0) {
            sbx_err_sys(err, -r, "closing a listener for the checkpoint");
            break;
        }
    }
    closedir(d);
    /* /proc/net is the sandbox's own only when the agent is its init; elsewhere (a
     * provider's sandbox, the local host) it lists the machine's, which no checkpoint of
     * ours takes. */
    if (r == 0 && a->pid1)
        r = foreign_socket(err);
    if (r < 0) {
        (void)snapshot_relisten(a);
        return r;
    }
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:i}", "parked", nparked));
    return 0;
}

int snapshot_relisten(struct agent *a)
{
    int n = 0;
    for (int i = 0; i < nparked; i++) {
        int fd = parked[i].fd;
        _cleanup_close_ int s =
            socket(parked[i].addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(s, (struct sockaddr *)&parked[i].addr, parked[i].len) < 0 || listen(s, 128) < 0 ||
            dup3(s, fd, O_CLOEXEC) < 0)
            continue; /* that listener stays closed; its owner sees no connections */
        if (loop_fd_unpark(a->loop, fd) > 0)
            n++;
    }
    nparked = 0;
    return n;
}

void snapshot_restored(struct agent *a)
{
    /* gVisor restores the epoll set, but host fds (our stdin/stdout, the shim's new pipes)
     * stop waking it; registering them anew does. */
    for (int fd = 0; fd <= 1; fd++)
        if (loop_fd_park(a->loop, fd) > 0)
            (void)loop_fd_unpark(a->loop, fd);
    (void)snapshot_relisten(a);
}

int snapshot_resume_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:i}", "listening", snapshot_relisten(a)));
    return 0;
}
