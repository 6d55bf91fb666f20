/* One command run in a sandbox through its agent, with its output captured up to
 * EXEC_OUTPUT_MAX per stream (the rest is counted, not kept). */
#ifndef SBX_EXEC_H
#define SBX_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct auth_identity;

#define EXEC_OUTPUT_MAX (1024u * 1024u)
#define EXEC_TIMEOUT_DEFAULT 900
#define EXEC_TIMEOUT_MAX 900
#define EXEC_CODE_MAX (512u * 1024u)
#define EXEC_CWD_MAX 4096
/* Less free space than this when a command ends means it ran into the quota. */
#define EXEC_WORKSPACE_FULL_BYTES (1024 * 1024)
#define EXEC_ID_LEN 23 /* "ex_" + 20 hex */

struct sandbox;
struct exec_run;

struct exec_output {
    char *buf;
    size_t len;
    unsigned long long dropped;
};

struct exec_result {
    const char *id;
    const char *sandbox_id;
    int exit_code;
    int signal;
    bool timed_out;
    bool oom_killed;     /* the agent's memory watcher killed one of its processes */
    bool pids_killed;    /* the agent's process guard killed its session at the limit */
    bool workspace_full; /* the workspace had no room left when the command ended */
    long long duration_ms;
    struct exec_output out[2]; /* stdout, stderr */
    json_t *receipt;
    json_t *session; /* {id, created, saved} when it ran in a session */
};

/* What to run, parsed from a request body. */
struct exec_params {
    json_t *argv;           /* array of strings, owned */
    json_t *env;            /* object of strings, borrowed from the request */
    const char *cwd;        /* borrowed */
    long long timeout_s;
    const char *command;    /* the shell line or the code, borrowed: hashed into the receipt */
    const char *language;   /* "shell", "python", "bash" or "node" */
    const char *session_id; /* borrowed; NULL: the default session, if the sandbox has one */
    bool cwd_given, timeout_given; /* else a session's own apply (docs/sessions.md) */
    const char *user;              /* "user", "root" or NULL: the session's own (sandbox/runas.h) */
};

/* Who asked, for the exec record and the audit log. */
struct exec_origin {
    const struct auth_identity *who;
    const char *request_id;
    const char *action; /* "exec" or "run" */
};

/* Parse {shell} | {language, code}, timeout_seconds (1..timeout_max: EXEC_TIMEOUT_MAX for
 * exec, more for sandbox_bash, spec 004), cwd, env, user. */
int exec_params_parse(json_t *body, long long timeout_max, struct exec_params *out,
                      struct sbx_err *err);
void exec_params_clear(struct exec_params *p);

/* How a requester follows a command. Every callback is optional; on_done runs once,
 * with either res or err. on_output sees only the bytes that are kept (the first
 * EXEC_OUTPUT_MAX of each stream), on_truncated once per stream when it passes that. */
struct exec_observer {
    void (*on_output)(unsigned ch, const uint8_t *buf, size_t len, void *data);
    void (*on_truncated)(unsigned ch, void *data);
    void (*on_done)(const struct exec_result *res, const struct sbx_err *err, void *data);
};

/* Start a command: it gets an id and a record in the store, which is finished (result,
 * receipt, audit entry) when it ends whether or not anyone still follows it.
 * sandbox_busy when one is already running. */
int exec_start(struct sandbox *sb, const struct exec_params *p, const struct exec_origin *o,
               const struct exec_observer *obs, void *data, struct exec_run **out,
               struct sbx_err *err);
const char *exec_run_id(const struct exec_run *run);
/* The requester went away: the command runs on and its record is still finished. */
void exec_abandon(struct exec_run *run);
/* SIGKILL to the command's process group (a caller cancelled it): it ends as killed
 * (exit_code 137) and its record, receipt and audit entry are finished as usual. */
void exec_kill(struct exec_run *run);

/* o[name]: the output as text, or base64 with name_encoding when it is not UTF-8, plus
 * name_truncated (and name_dropped_bytes). */
void exec_output_put(json_t *o, const char *name, const struct exec_output *out);

/* The blocking answer (and the stored result): exit facts, output, flags, receipt. */
json_t *exec_result_to_json(const struct exec_result *res);

/* GET .../execs/{id}: an exec's record of user's (running, or its stored result), with
 * status and times. exec_not_found for another user's or an unknown id. */
struct store;
int exec_record_json(struct store *st, const char *sandbox_id, const char *exec_id,
                     const char *user, json_t **out, struct sbx_err *err);

#endif
