/* sbx-agent: PID 1 inside every sandbox. One framed, multiplexed connection
 * (docs/protocol.md) on fd 0/1; everything the daemon asks for runs as a
 * stream. The agent is single threaded and signal free (signals arrive through
 * a signalfd), so all state hangs off one struct agent passed to every call. */
#ifndef SBX_AGENT_H
#define SBX_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/loop.h"
#include "conn.h"

/* Everything a peer controls is bounded. */
#define AGENT_MAX_STREAMS 256
#define AGENT_MAX_SESSIONS 32
/* Sessions that keep a resident bash (spare.c): each is one process, idle between commands. */
#define AGENT_MAX_SPARES 4
/* Background processes, running or exited (an exited one keeps its logs). */
#define AGENT_MAX_PROCESSES 64
/* Terminals (pty.c), live or exited. */
#define AGENT_MAX_PTYS 32
/* Largest single read from a pipe or from the connection (and largest DATA frame we send). */
#define AGENT_READ_CHUNK PROTO_READ_MAX

struct stream;
struct kernel;
struct session;
struct process;
struct egress_listener;
struct pty;
struct oomwatch;
struct pidguard;
struct spare;

struct agent {
    struct loop *loop;
    struct conn conn;
    struct stream *streams[AGENT_MAX_STREAMS];
    unsigned nstreams;
    struct session *sessions[AGENT_MAX_SESSIONS]; /* in creation order */
    unsigned nsessions;
    unsigned long long session_gen;
    /* The resident shells of the sessions used last (spare.c). */
    struct spare *spares[AGENT_MAX_SPARES];
    unsigned long long spare_tick[AGENT_MAX_SPARES], spare_clock; /* when each was last of use */
    char spare_for[64 + 1]; /* SESSION_ID_MAX: the session whose shell command just ended */
    int spare_dir, spare_udir;    /* SPARE_DIR and the user's in it; -1 outside a sandbox */
    unsigned long long spare_seq; /* names the files of each command handed to one */
    struct process *procs[AGENT_MAX_PROCESSES]; /* in start order */
    unsigned nprocs;
    unsigned long long proc_seq;
    struct kernel *kernel;            /* the Python kernel, NULL until first used (kernel.c) */
    struct egress_listener *egress;   /* the proxy listener, NULL outside a sandbox (egress.c) */
    struct pty *ptys[AGENT_MAX_PTYS]; /* oldest first (pty.c) */
    unsigned nptys;
    unsigned long long pty_seq;
    struct oomwatch *oom;   /* the memory watcher, NULL until a daemon names the limit */
    struct pidguard *guard; /* the process guard, NULL without a process limit to hold */
    /* quiet.c: frames read from the daemon since the start or the last restore; whether the
     * agent looks for quiet (its init only) and has a look scheduled */
    unsigned long long rx_frames;
    bool quiet_on, quiet_armed;
    int sigfd;
    struct loop_watch *sig_w;
    bool pid1;
    char boot_id[33];
    /* Kill every stream's processes before a fatal exit (fatal.c; set by main). */
    void (*on_fatal)(struct agent *a);
    uint8_t iobuf[AGENT_READ_CHUNK]; /* scratch for reads; single threaded */
};

#endif
