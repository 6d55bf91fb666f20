/* The agent tools on a workspace that is not on this host (sandbox_workspace_remote: a
 * provider's sandbox, a remote docker engine's): every tool that touches workspace files
 * goes through the agent's file helper (files/agentfs.h) inside the sandbox, with the
 * answers, error codes and audit entries of the host path (tools.c). edit_file reads the
 * file (bounded), edits it here with the same pure code (fileedit.h) and writes it back
 * atomically; sandbox_files lists, reads and writes; sandbox_bash's files compare two of the
 * agent's listings here (wschanges.h) and hash the changed files from their bytes read
 * back; bsl_check's path is checked beneath /workspace by the agent. Each step is one
 * helper run; a call that goes away cancels it (toolws_cancel). */
#ifndef SBX_TOOLWS_H
#define SBX_TOOLWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

struct tool_call;
struct toolws;

/* These answer through tools_finish (toolcall.h); a negative return: nothing started. */
int toolws_edit(struct tool_call *c, struct sbx_err *err);
/* sandbox_files on a checked path. */
int toolws_list(struct tool_call *c, const char *path, bool recursive, struct sbx_err *err);
int toolws_read(struct tool_call *c, const char *path, struct sbx_err *err);
int toolws_write(struct tool_call *c, const char *path, const char *buf, size_t len,
                 struct sbx_err *err);
/* bsl_check: path is a file or a folder beneath /workspace; then tools_bsl_exec. */
int toolws_bsl_check(struct tool_call *c, const char *path, struct sbx_err *err);
/* sandbox_bash: the listing before the command (into c->before; none when the agent could
 * not walk), then tools_exec_begin; after it, the changed files and tools_bash_answer with
 * o (taken), or the receipt's outputs when a listing is missing. */
void toolws_bash_before(struct tool_call *c);
void toolws_bash_after(struct tool_call *c, json_t *o, json_t *outputs);

/* The call went away: the running helper is cancelled, nothing is reported. */
void toolws_cancel(struct toolws *w);
void toolws_free(struct toolws *w);

#endif
