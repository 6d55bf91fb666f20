/* E2B's data plane (what envd and the code interpreter serve inside an E2B sandbox),
 * answered by sbxd under /e2b/sandbox: envd_api.c finds the sandbox (E2b-Sandbox-Id, or
 * a Host of {port}-{id}.{domain}), checks its X-Access-Token and hands the request to
 * one of the services below. */
#ifndef SBX_E2B_ENVD_H
#define SBX_E2B_ENVD_H

#include <jansson.h>

#include "../auth/auth.h"

struct sbxd;
struct sandbox;
struct http_req;

struct envd_ctx {
    struct sbxd *d;
    struct http_req *req;
    struct sandbox *sb;
    struct auth_identity who; /* the sandbox's owner: audit entries name its key */
};

/* process.Process/<method> (e2b_process.c). */
void envd_process(const struct envd_ctx *c, const char *method);
/* envd's KeepAlive event of a process stream; an argv array as one line, joined by spaces
 * (what ran, for audit entries). */
json_t *e2b_keepalive_msg(void);
char *e2b_argv_text(json_t *argv);
/* envd's EndEvent for an agent's exit record ({exit_code, signal}) (e2b_process.c). */
json_t *e2b_end_event(json_t *proc);
/* A Start with "pty": op is its pty_open (stolen), answered as a stream (e2b_pty.c). */
void envd_pty_start(const struct envd_ctx *c, json_t *op);
/* Connect to pid, which is no background process's: a PTY's, or not_found. req is
 * suspended and answered as a stream. */
void envd_pty_connect(struct sbxd *d, struct sandbox *sb, struct http_req *req, const char *pid);
/* PTY {cols, rows} (size may be NULL) into op's cols and rows. */
int e2b_pty_size(json_t *size, json_t *op, struct sbx_err *err);
/* filesystem.Filesystem/<method> (e2b_fs.c). */
void envd_fs(const struct envd_ctx *c, const char *method);
/* WatchDir's stream for the request message (e2b_watch.c). */
void envd_watch(const struct envd_ctx *c, json_t *msg);
/* envd's EntryInfo for a workspace-relative path (e2b_fs.c). */
struct stat;
json_t *e2b_entry_json(const char *rel, const struct stat *st, const char *target);
/* The same for an absolute path in the sandbox, owned by owner (entry.c). */
json_t *e2b_entry_at(const char *path, const struct stat *st, const char *target,
                     const char *owner);
/* GET /files and the streamed POST /files (e2b_files.c). */
void envd_files_get(const struct envd_ctx *c);
void envd_files_post(const struct envd_ctx *c);
/* The code interpreter: POST /execute, /contexts... (e2b_interp.c); rest is the path
 * after the data plane's prefix. */
void envd_interp(const struct envd_ctx *c, const char *rest);

#endif
