/* File operations on any path of the sandbox, done inside it by the agent as the request's
 * user (agentfs_src.h's helper), so what they reach and the permission errors they get are
 * the sandbox user's own, whatever backend runs the sandbox. */
#ifndef SBX_E2B_AGENTFS_H
#define SBX_E2B_AGENTFS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct sandbox;
struct agentfs;

/* Largest answer the helper may send (a listing, or a file read outside the workspace). */
#define AGENTFS_OUT_MAX (64u * 1024u * 1024u)
/* Most entries a listing answers. */
#define AGENTFS_LIST_MAX 10000

/* Once: the helper's result ({"ok": …}'s value, borrowed; NULL for "read"), the raw bytes of
 * a "read", or err (file_not_found, path_permission_denied, dir_exists, invalid_path,
 * file_too_large, or the agent's). The call is freed after it. */
typedef void (*agentfs_done_fn)(json_t *ok, const uint8_t *raw, size_t len,
                                const struct sbx_err *err, void *data);

/* Run req ({op, path, …}, stolen) as user (NULL: the sandbox's user). On failure nothing is
 * reported later. */
int agentfs_start(struct sandbox *sb, const char *user, json_t *req, agentfs_done_fn done,
                  void *data, struct agentfs **out, struct sbx_err *err);
/* The requester went away: report nothing. */
void agentfs_cancel(struct agentfs *f);
/* envd's EntryInfo of one helper entry [path, mode, size, mtime_ns, uid, gid, target]. */
json_t *agentfs_entry(json_t *row);

#endif
