/* Inside the agent tools (tools.c, toolws.c): one call's state, and the steps of tools.c that
 * the remote workspace's side (toolws.c) hands back to once the agent has answered. */
#ifndef SBX_TOOLCALL_H
#define SBX_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>

#include "../auth/auth.h"
#include "../exec/exec.h"
#include "../http/server.h"
#include "../live/kernel.h"
#include "../sandbox/manager.h"
#include "../store/store.h"
#include "catalog.h"
#include "tools.h"

enum wait_kind {
    WAIT_NONE,
    WAIT_READY,     /* a sandbox waiter (create, or readiness before a command) */
    WAIT_EXEC,      /* exec_start */
    WAIT_KERNEL,    /* kernel_run_start */
    WAIT_PTY,       /* a PTY call */
    WAIT_ARTIFACTS, /* a collection on the worker pool: cannot be called back */
    WAIT_SNAP,      /* pause, resume, fork */
    WAIT_AGENT,     /* a file helper in a remote workspace (toolws.c) */
};

struct tool_call {
    struct sbxd *d;
    const struct tool_def *def;
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    json_t *args; /* owned */
    json_t *body; /* owned: what exec or kernel params were parsed from (they borrow) */
    struct sandbox *sb;
    char sandbox_id[STORE_ID_MAX + 1];
    tool_done_fn cb;
    void *data;
    bool abandoned;
    enum wait_kind wait;
    struct exec_params ep;
    bool ep_set;
    struct exec_run *exec;
    char exec_id[EXEC_ID_LEN + 1];
    struct kernel_params kp;
    struct kernel_run *krun;
    struct pty_call *pty;
    struct snap_call *snap;
    struct ws_listing *before; /* sandbox_bash: the workspace before its command */
    json_t *pending;           /* an answer waiting for the artifacts' links */
    char *link_path;           /* sandbox_files read: the one path whose link is wanted */
    json_t *bsl_unsupported;   /* bsl_check: codes asked for that sbx-bsl does not have */
    struct toolws *ws;         /* a remote workspace's side (toolws.h) */
};

/* Report (unless abandoned) and free the call; takes result and details. */
void tools_finish(struct tool_call *c, json_t *result, const struct sbx_err *err, json_t *details);
void tools_fail(struct tool_call *c, const struct sbx_err *err);
/* Where a client fetches a workspace file: the files route (with its key). */
json_t *tools_file_url(struct tool_call *c, const char *path);
/* Finish with pending once the artifacts' signed links are in it. */
void tools_collect_links(struct tool_call *c, json_t *pending);
/* sandbox_bash, sandbox_exec, bsl_check: start the command (the sandbox is ready). */
void tools_exec_begin(struct tool_call *c);
/* sandbox_bash's answer o (taken) with the files the command changed (taken). */
void tools_bash_answer(struct tool_call *c, json_t *o, json_t *files);
/* bsl_check once its path is checked: run sbx-bsl. */
void tools_bsl_exec(struct tool_call *c);
/* sandbox_files: a listing's entry (a ws_walk_fn; data: the list) and the listing's answer
 * (takes list); a read's answer, inline or (past TOOLS_READ_INLINE_MAX) its digest and link;
 * a write's audit entry and answer (err: it failed). */
struct ws_entry;
int tools_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err);
void tools_list_answer(struct tool_call *c, const char *path, json_t *list, bool truncated);
void tools_read_inline(struct tool_call *c, const char *path, const char *buf, size_t len);
void tools_read_large(struct tool_call *c, const char *path, uint64_t size, const char *sha);
void tools_write_done(struct tool_call *c, const char *path, size_t len, const struct sbx_err *err);

#endif
