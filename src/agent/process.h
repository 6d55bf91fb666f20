/* Background processes (docs/sessions.md): commands that outlive the stream that
 * started them. The agent keeps each one's record and its stdout and stderr in
 * rings of PROCESS_LOG_MAX bytes each, from its start until the sandbox ends, so a
 * daemon that reconnects (a new HELLO) finds them all. Records of exited
 * processes are reused, oldest first, once AGENT_MAX_PROCESSES are kept.
 *
 * Ops: "process_start", "process_list", "process_get", "process_signal",
 * "process_kill", "process_logs", "process_input". process_start may ask for a stdin pipe
 * (stdin), a lifetime (timeout_ms: SIGKILL to its group then) and keep a label; process_logs
 * with tail follows from the current end. process_kill answers when the whole group is gone
 * (PROCESS_KILL_GROUP_WAIT_MS at most).
 *
 * A follower may ask for every byte (process_logs "lossless", with follow): while its unsent
 * bytes fill a ring, that pipe is not read, so the process blocks on write as on a real
 * pipe instead of the ring forgetting. process_start "lossless" keeps the rings whole until
 * such a follower attaches (the start's own answer comes first), or PROCESS_LOSSLESS_WAIT_MS
 * pass; a process nobody follows losslessly is never held back. */
#ifndef SBX_AGENT_PROCESS_H
#define SBX_AGENT_PROCESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/err.h"

#define PROCESS_LOG_MAX (512u * 1024u)
/* How long a lossless start waits for its follower before its rings forget again (the
 * starter went away between the start and the follow). */
#define PROCESS_LOSSLESS_WAIT_MS 10000
/* The command as shown in listings (the command itself may be much longer). */
#define PROCESS_COMMAND_SHOWN 1024
/* A starter's label of a process (the E2B surface keeps its process config there). */
#define PROCESS_LABEL_MAX (16u * 1024u)
/* Base64 characters of one process_input. */
#define PROCESS_INPUT_MAX (256u * 1024u)
/* Input a process has not read yet that the agent holds for it; more is process_stdin_full. */
#define PROCESS_INPUT_PENDING_MAX (1024u * 1024u)
/* process_kill answers once no member of the group is left (SIGKILLed members that outlive
 * the leader, reparented to the agent, are reaped a moment later): how long it waits for
 * them at most, and how often it looks. */
#define PROCESS_KILL_GROUP_WAIT_MS 10000
#define PROCESS_KILL_GROUP_POLL_MS 10

struct agent;

int process_start_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_list_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_get_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_signal_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_kill_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int process_logs_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
/* {id, data?: base64, close?: bool}: write to the process's stdin pipe, then close it. */
int process_input_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

/* pid was reaped and belongs to no stream: returns true when it was a process's. */
bool process_child_exit(struct agent *a, pid_t pid, int status);
/* Children were reaped: note the groups of finished processes that have emptied, before
 * their leader's pid can be reused (process.c, process_group_alive). */
void process_groups_check(struct agent *a);
/* The agent is going away: kill every process group. */
void process_kill_all(struct agent *a);

#endif
