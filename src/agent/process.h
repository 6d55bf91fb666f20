/* Background processes (docs/sessions.md): commands that outlive the stream that
 * started them. The agent keeps each one's record and its stdout and stderr in
 * rings of PROCESS_LOG_MAX bytes each, from its start until the sandbox ends, so a
 * daemon that reconnects (a new HELLO) finds them all. Records of exited
 * processes are reused, oldest first, once AGENT_MAX_PROCESSES are kept.
 *
 * Ops: "process_start", "process_list", "process_get", "process_signal",
 * "process_kill", "process_logs". */
#ifndef SBX_AGENT_PROCESS_H
#define SBX_AGENT_PROCESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/err.h"

#define PROCESS_LOG_MAX (512u * 1024u)
/* The command as shown in listings (the command itself may be much longer). */
#define PROCESS_COMMAND_SHOWN 1024

struct agent;

int process_start_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_list_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_get_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_signal_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_kill_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_logs_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

/* pid was reaped and belongs to no stream: returns true when it was a process's. */
bool process_child_exit(struct agent *a, pid_t pid, int status);
/* The agent is going away: kill every process group. */
void process_kill_all(struct agent *a);

#endif
