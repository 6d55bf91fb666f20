/* Host-side work on template trees for custom builds, run on worker threads (jobs.h):
 * none of it touches loop state, and none of it follows a symlink inside a tree (a
 * custom template's tree holds whatever its build steps made). */
#ifndef SBX_TEMPLATES_TREE_H
#define SBX_TEMPLATES_TREE_H

#include <stddef.h>

#define TREE_ERR_MAX 512
/* A built tree larger than this fails its build (the build sandbox writes to the host's
 * disk through gVisor's gofer, which has no quota of its own). */
#define TREE_BYTES_MAX (16LL * 1024 * 1024 * 1024)

/* cp -a src dst (dst must not exist): a full copy, no hard links into src. */
int tree_copy(const char *src, const char *dst, char why[TREE_ERR_MAX]);
/* rm -rf --one-file-system path. */
int tree_remove(const char *path, char why[TREE_ERR_MAX]);
/* The content digest of docs/templates.md (what scripts/build-template.sh computes):
 * sha256 over one line per entry, sorted by path. bytes = the regular files' sizes. */
int tree_digest(const char *root, char out[65], long long *bytes, long long *entries,
                char why[TREE_ERR_MAX]);

#endif
