/* The workspace files a command created or changed, for sandbox_bash's files: a listing of
 * every regular file (path, size, mtime, inode) taken before the command is compared with
 * one taken after it, and the new or changed files are hashed. The exec receipt covers
 * /workspace/out only; agents write anywhere. Bounded on every side: the walk, the files
 * reported and the bytes hashed on the loop. */
#ifndef SBX_WSCHANGES_H
#define SBX_WSCHANGES_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define WSCHANGES_WALK_MAX 50000
#define WSCHANGES_FILES_MAX 200
/* Bytes hashed per command; files past it are listed without sha256. */
#define WSCHANGES_HASH_BUDGET (256ull * 1024 * 1024)

struct ws_listing;

int ws_listing_take(int root, struct ws_listing **out, struct sbx_err *err);
void ws_listing_free(struct ws_listing *l);
/* [{path, size, sha256?}] of the files that are new or changed since before, in path order.
 * *truncated: more than WSCHANGES_FILES_MAX changed, or a walk was cut short. */
json_t *ws_listing_changes(const struct ws_listing *before, int root, bool *truncated,
                           struct sbx_err *err);

#endif
