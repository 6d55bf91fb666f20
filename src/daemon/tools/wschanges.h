/* The workspace files a command created or changed, for sandbox_bash's files: a listing of
 * every regular file (path, size, mtime, ctime, inode) taken before the command is compared
 * with one taken after it, and the new or changed files are hashed. The exec receipt covers
 * /workspace/out only; agents write anywhere. A workspace on this host is walked here; one
 * inside a remote sandbox is walked by the agent (toolws.c) into the same listing, so the
 * comparison is this one. Bounded on every side: the walk, the files reported and the bytes
 * hashed. */
#ifndef SBX_WSCHANGES_H
#define SBX_WSCHANGES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"

#define WSCHANGES_WALK_MAX 50000
#define WSCHANGES_FILES_MAX 200
/* Bytes hashed per command; files past it are listed without sha256. */
#define WSCHANGES_HASH_BUDGET (256ull * 1024 * 1024)

struct ws_listing;

struct ws_listing *ws_listing_new(void);
void ws_listing_add(struct ws_listing *l, const char *path, uint64_t size, int64_t mtime_ns,
                    int64_t ctime_ns, uint64_t ino);
/* The walk behind l was cut short (more than WSCHANGES_WALK_MAX entries). */
void ws_listing_set_truncated(struct ws_listing *l);
void ws_listing_free(struct ws_listing *l);
/* [{path, size}] of the files of now that are new or changed since before, in path order,
 * at most WSCHANGES_FILES_MAX. *truncated: more changed, or a walk was cut short. */
json_t *ws_listing_diff(struct ws_listing *before, struct ws_listing *now, bool *truncated);

/* A workspace on this host (root: its O_PATH fd). */
int ws_listing_take(int root, struct ws_listing **out, struct sbx_err *err);
/* ws_listing_diff against the workspace now, each file hashed (sha256, and size as read)
 * within WSCHANGES_HASH_BUDGET; a file that went away meanwhile has no sha256. */
json_t *ws_listing_changes(struct ws_listing *before, int root, bool *truncated,
                           struct sbx_err *err);

#endif
