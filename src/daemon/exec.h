/* One command run in a sandbox through its agent, with its output captured up to
 * EXEC_OUTPUT_MAX per stream (the rest is counted, not kept). */
#ifndef SBX_EXEC_H
#define SBX_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

#define EXEC_OUTPUT_MAX (1024u * 1024u)
#define EXEC_TIMEOUT_DEFAULT 900
#define EXEC_TIMEOUT_MAX 900
#define EXEC_CODE_MAX (512u * 1024u)
#define EXEC_CWD_MAX 4096

struct sandbox;
struct exec_run;

struct exec_output {
    char *buf;
    size_t len;
    unsigned long long dropped;
};

struct exec_result {
    int exit_code;
    int signal;
    bool timed_out;
    long long duration_ms;
    struct exec_output out[2]; /* stdout, stderr */
    json_t *session; /* {id, created, saved} when it ran in a session */
};

/* What to run, parsed from a request body. */
struct exec_params {
    json_t *argv;           /* array of strings, owned */
    json_t *env;            /* object of strings, borrowed from the request */
    const char *cwd;        /* borrowed */
    long long timeout_s;
    const char *session_id; /* borrowed; NULL: the default session, if the sandbox has one */
    bool cwd_given, timeout_given; /* else a session's own apply (docs/sessions.md) */
};

/* Parse {shell} | {language, code}, timeout_seconds, cwd, env. */
int exec_params_parse(json_t *body, struct exec_params *out, struct sbx_err *err);
void exec_params_clear(struct exec_params *p);

/* Called once, with either res or err. */
typedef void (*exec_done_fn)(const struct exec_result *res, const struct sbx_err *err,
                             void *data);

/* Start a command; sandbox_busy when one is already running. */
int exec_start(struct sandbox *sb, const struct exec_params *p, exec_done_fn cb, void *data,
               struct exec_run **out, struct sbx_err *err);
/* The requester went away: the command runs on, its result is discarded. */
void exec_abandon(struct exec_run *run);

/* ["K=V", ...] for the agent: the sandbox's env (object) overlaid by a request's. */
json_t *exec_env_list(json_t *sandbox_env, json_t *exec_env);

/* o[name]: the output as text, or base64 with name_encoding when it is not UTF-8, plus
 * name_truncated (and name_dropped_bytes). */
void exec_output_put(json_t *o, const char *name, const struct exec_output *out);

json_t *exec_result_to_json(const struct exec_result *res);

#endif
