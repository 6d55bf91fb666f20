/* Shell sessions (docs/sessions.md): named shell contexts kept by the agent, so
 * they outlive any daemon. A session is the state a shell carries between
 * commands -- its exported environment, its working directory -- plus a default
 * command timeout. Each command in a session is a fresh bash in its own process
 * group that starts from that state and, through an EXIT trap installed by a
 * BASH_ENV prelude, writes its final state to a pipe the agent reads. So a
 * timeout, `exit 3` or `exec true` ends exactly that command; the session stays.
 *
 * Ops: "session_create", "session_list", "session_delete"; "exec" and
 * "process_start" name a session with "session" (created with defaults when it
 * does not exist). */
#ifndef SBX_AGENT_SESSION_H
#define SBX_AGENT_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"
#include "env.h"

#define SESSION_ID_MAX 64
#define SESSION_CWD_DEFAULT "/workspace"
/* The fds a session command finds its state pipe and its prelude on. */
#define SESSION_FD_STATE 100
#define SESSION_FD_PRELUDE 101

struct agent;
struct spawn_req;

struct session {
    char id[SESSION_ID_MAX + 1];
    struct envv env; /* the exported environment, base variables included */
    char *cwd;
    long long timeout_ms;   /* default command timeout; 0: none */
    unsigned long long gen; /* unique per creation, so a deleted-and-recreated id differs */
    long long created_at;   /* unix seconds */
    bool root;              /* its commands run as root unless one asks otherwise ("user") */
};

int session_create_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int session_list_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int session_delete_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

/* The session a request names in "session" (NULL in *out when it names none),
 * created from "session_env" with the default cwd when it does not exist. */
int session_resolve(struct agent *a, json_t *req, struct session **out, bool *created,
                    struct sbx_err *err);

/* Where a command in s starts when the request names no cwd: the session's
 * directory, or the default one when that was removed. */
const char *session_cwd(const struct session *s);

/* One command in a session, from before its spawn to the saving of its state. */
struct session_run;

/* Prepare sr (whose envp the caller built from the session's env) for a command
 * in s. With capture (the command is `bash -c S`), the run gets a state pipe and
 * a prelude and sets sr->extra. overlay (the request's own "env") and a cwd the
 * request set in sr apply to this command only: what the command leaves as it got
 * it is not saved. */
int session_run_begin(struct agent *a, struct session *s, bool created, bool capture,
                      json_t *overlay, struct envv *env, struct spawn_req *sr,
                      struct session_run **out, struct sbx_err *err);
/* A command a resident shell of s runs (spare.c): nothing to spawn, and its state comes
 * back through session_run_save. */
struct session_run *session_run_resident(struct agent *a, struct session *s);
/* Save "cwd\0" + `export -p` + "\0" (len bytes) into the run's session, unless it was
 * deleted meanwhile; what session_run_end reports as "saved". */
bool session_run_save(struct session_run *run, const char *state, size_t len);
struct session *session_find(struct agent *a, const char *id);
/* The command was spawned (or not): drop the fds only the child needs. */
void session_run_spawned(struct session_run *run);
/* The command ended: save what it left (when it got that far) and describe the
 * run as {"id", "created", "saved"}. A shell command names its session in
 * agent->spare_for, for spare_refill. Frees run. */
json_t *session_run_end(struct session_run *run);
void session_run_free(struct session_run *run);

#endif
