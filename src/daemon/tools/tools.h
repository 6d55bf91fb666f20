/* The agent tools (docs/tools.md) as one module that the REST routes (tools_api.c) and
 * the MCP server (mcp/) both call: every tool runs through the same daemon functions as
 * the REST API (manager_*, exec_start, kernel_run_start, the PTY calls, the workspace
 * functions), so limits, tenant checks and audit are the ones the routes have. */
#ifndef SBX_TOOLS_H
#define SBX_TOOLS_H

#include <jansson.h>

#include "../../common/err.h"
#include "catalog.h"

/* sandbox_files reads at most this much inline; larger files answer a link. */
#define TOOLS_READ_INLINE_MAX (256u * 1024u)
/* sandbox_bash's timeout: default and maximum (spec 004: 1..3600, default 60), beyond
 * plain exec's EXEC_TIMEOUT_MAX (spec 000). */
#define TOOLS_BASH_TIMEOUT_DEFAULT 60
#define TOOLS_BASH_TIMEOUT_MAX 3600
#define TOOLS_FILES_LIST_MAX 10000
/* bsl_check (docs/bsl.md): diagnostics listed by default and at most (the report stays under
 * the exec output limit), and its default timeout. */
#define TOOLS_BSL_RESULTS_DEFAULT 500
#define TOOLS_BSL_RESULTS_MAX 2000
#define TOOLS_BSL_TIMEOUT_DEFAULT 120
#define TOOLS_BSL_CODES_MAX 200

struct sbxd;
struct auth_identity;
struct tool_call;

struct tool_request {
    const struct auth_identity *who;
    const char *request_id;
    const char *name;
    json_t *args;           /* borrowed (copied) */
    const char *sandbox_id; /* the route's, or NULL: args.sandbox_id */
};

/* Once: the tool's answer (borrowed), or err with optional details (borrowed) such as
 * edit_file's candidates. It may run before tools_call returns. */
typedef void (*tool_done_fn)(json_t *result, const struct sbx_err *err, json_t *details,
                             void *data);

/* *out is set before anything runs, so a synchronous on_done can clear it. */
void tools_call(struct sbxd *d, const struct tool_request *rq, tool_done_fn cb, void *data,
                struct tool_call **out);
/* The requester went away: on_done never runs. A command or cell runs on (its record is
 * still finished), as when a REST client leaves. */
void tools_call_abandon(struct tool_call *c);
/* The requester cancelled: on_done never runs; a command the call runs is killed (SIGKILL;
 * its record is finished as killed), a kernel cell interrupted. Anything else goes as with
 * abandon. */
void tools_call_cancel(struct tool_call *c);
/* The id of the command a running call waits for (a handle to poll), else NULL. */
const char *tools_call_exec_id(const struct tool_call *c);
/* The sandbox a call acts on, once looked up, else NULL. */
const char *tools_call_sandbox_id(const struct tool_call *c);

#endif
