/* A sandbox's /workspace that is not on this host (a provider's sandbox; later a remote
 * Docker engine's): the files routes reach it through the agent (agentfs.h), with the same
 * answers, codes and audit entries as the host path (files_api.c), every path resolved
 * beneath /workspace inside the sandbox. */
#ifndef SBX_FILES_AGENTWS_H
#define SBX_FILES_AGENTWS_H

#include <jansson.h>
#include <stdbool.h>

#include "workspace.h"

struct sbxd;
struct sandbox;
struct http_req;

/* For the sandboxes whose workspace is not sb->workspace on this host
 * (sandbox_workspace_remote: a provider's, a remote docker engine's). */
/* The workspace inside the sandbox. */
#define AGENTWS_ROOT "/workspace"
/* Upload bytes held while the agent's window is closed (the body is paused meanwhile). */
#define AGENTWS_PENDING_MAX (4u * 1024u * 1024u)

/* The routes of files_api.c for such a sandbox; path is checked already. */
void agentws_get(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path);
void agentws_put(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path);
void agentws_list(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path,
                  bool recursive);
void agentws_delete(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path);
/* A "wsls" answer's rows [path, mode, size, mtime_ns, uid, gid, target], each given to fn
 * (with the new list as its data) as the host walk would give its entry. */
json_t *agentws_rows(json_t *ok, ws_walk_fn fn);

#endif
