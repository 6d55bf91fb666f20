/* exec_command and write_stdin (docs/terminals.md) as calls on a sandbox's PTY sessions,
 * shared by the /pty routes and the agent tools: the PTY, its output ring and the
 * waiting live in the agent (ops pty_*); this translates requests into ops and the
 * agent's answers into {object: "pty", session_id, pid, cursor, alive, status, exit_code,
 * stdout}. */
#ifndef SBX_PTYCALL_H
#define SBX_PTYCALL_H

#include <jansson.h>

#include "../../common/err.h"

/* Longest a request may hold the connection waiting for output. */
#define PTY_WAIT_MAX_S 60
#define PTY_INPUT_BODY_MAX (64u * 1024u)
#define PTY_SESSION_ID_MAX 32

struct sandbox;
struct pty_call;

/* Once, with the answer (borrowed) or err; the call is freed after it. */
typedef void (*pty_done_fn)(json_t *answer, const struct sbx_err *err, void *data);

/* Who asks (exec_command and write_stdin are audited as "pty.exec_command" and
 * "pty.write_stdin" once the agent has the op: the command, or the input, through
 * audit_command_details; via: "rest" or "tool"). */
struct auth_identity;
struct pty_origin {
    const struct auth_identity *who;
    const char *request_id;
    const char *via;
};

/* {command, rows?, cols?, grace_seconds?}: start a command and wait up to the grace for
 * it to end. A command that is over answers without session_id. */
int pty_exec_command(struct sandbox *sb, const struct pty_origin *o, json_t *body,
                     pty_done_fn cb, void *data, struct pty_call **out, struct sbx_err *err);
/* {input, since?, wait_seconds?} into session sid, then read what it printed. */
int pty_write_stdin(struct sandbox *sb, const struct pty_origin *o, const char *sid,
                    json_t *body, pty_done_fn cb, void *data, struct pty_call **out,
                    struct sbx_err *err);
/* Read after cursor since (JSON integer or NULL), waiting up to wait (seconds, or NULL). */
int pty_read(struct sandbox *sb, const char *sid, json_t *since, json_t *wait, pty_done_fn cb,
             void *data, struct pty_call **out, struct sbx_err *err);
int pty_kill(struct sandbox *sb, const char *sid, pty_done_fn cb, void *data,
             struct pty_call **out, struct sbx_err *err);
/* The requester went away: nothing more is reported. */
void pty_call_cancel(struct pty_call *c);
/* Key key_id was deleted: the PTY sessions it opened on sb through exec_command end. */
void pty_revoke_key(struct sandbox *sb, const char *key_id);

#endif
