/* Route handlers, one file per resource. Each answers through http_respond_* now
 * or suspends the request and answers later. */
#ifndef SBX_API_H
#define SBX_API_H

struct sbxd;
struct http_req;

typedef void (*api_handler)(struct sbxd *d, struct http_req *req);

void api_health(struct sbxd *d, struct http_req *req);

void api_keys_create(struct sbxd *d, struct http_req *req);
void api_keys_list(struct sbxd *d, struct http_req *req);
void api_keys_delete(struct sbxd *d, struct http_req *req);

void api_sandboxes_create(struct sbxd *d, struct http_req *req);
void api_sandboxes_list(struct sbxd *d, struct http_req *req);
void api_sandboxes_get(struct sbxd *d, struct http_req *req);
void api_sandboxes_delete(struct sbxd *d, struct http_req *req);

void api_sandbox_pause(struct sbxd *d, struct http_req *req);
void api_sandbox_resume(struct sbxd *d, struct http_req *req);
void api_sandbox_fork(struct sbxd *d, struct http_req *req);
void api_sandbox_snapshot(struct sbxd *d, struct http_req *req);

void api_exec(struct sbxd *d, struct http_req *req);
void api_run(struct sbxd *d, struct http_req *req);

void api_sessions_create(struct sbxd *d, struct http_req *req);
void api_sessions_list(struct sbxd *d, struct http_req *req);
void api_sessions_delete(struct sbxd *d, struct http_req *req);

void api_processes_start(struct sbxd *d, struct http_req *req);
void api_processes_list(struct sbxd *d, struct http_req *req);
void api_processes_get(struct sbxd *d, struct http_req *req);
void api_processes_kill(struct sbxd *d, struct http_req *req);
void api_processes_logs(struct sbxd *d, struct http_req *req);
void api_processes_signal(struct sbxd *d, struct http_req *req);

void api_files_list(struct sbxd *d, struct http_req *req);
void api_files_put(struct sbxd *d, struct http_req *req);
void api_files_get(struct sbxd *d, struct http_req *req);
void api_files_delete(struct sbxd *d, struct http_req *req);

void api_artifacts_list(struct sbxd *d, struct http_req *req);
void api_artifacts_download(struct sbxd *d, struct http_req *req);
void api_exec_get(struct sbxd *d, struct http_req *req);

void api_audit_list(struct sbxd *d, struct http_req *req);
void api_audit_verify(struct sbxd *d, struct http_req *req);

void api_pty_create(struct sbxd *d, struct http_req *req);
void api_pty_input(struct sbxd *d, struct http_req *req);
void api_pty_read(struct sbxd *d, struct http_req *req);
void api_pty_delete(struct sbxd *d, struct http_req *req);

void api_terminal_ticket(struct sbxd *d, struct http_req *req);
void api_terminal_connect(struct sbxd *d, struct http_req *req);

void api_preview_create(struct sbxd *d, struct http_req *req);

void api_egress_get(struct sbxd *d, struct http_req *req);
void api_egress_put(struct sbxd *d, struct http_req *req);

void api_run_code(struct sbxd *d, struct http_req *req);
void api_kernel_reset(struct sbxd *d, struct http_req *req);
void api_kernel_interrupt(struct sbxd *d, struct http_req *req);

#endif
