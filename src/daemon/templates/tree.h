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

/* The build's writable root: an overlay mount at dir/mnt of lower (read-only, never
 * changed) and dir/upper (what the build writes), with overlayfs' redirects, metacopy and
 * index off, so that upper alone says every change: new and changed entries, whiteouts
 * (0:0 character devices) and opaque directories. */
int tree_overlay_mount(const char *lower, const char *dir, char why[TREE_ERR_MAX]);
/* Unmount dir/mnt once nothing holds it any more (the build sandbox's gofer lets go after
 * its container is deleted); lazily after timeout_ms. */
int tree_overlay_unmount(const char *dir, int timeout_ms, char why[TREE_ERR_MAX]);
/* The finished tree at dst: lower's files hard-linked (templates are read-only everywhere,
 * so they share inodes safely), then dir/upper's changes moved over it: whiteouts remove,
 * opaque directories replace, everything else replaces the entry of the same path (a
 * changed file is a new inode, never lower's). dir/upper is consumed. */
int tree_merge(const char *lower, const char *dir, const char *dst, char why[TREE_ERR_MAX]);
/* rm -rf --one-file-system path. */
int tree_remove(const char *path, char why[TREE_ERR_MAX]);
/* The content digest of docs/templates.md (what scripts/build-template.sh computes):
 * sha256 over one line per entry, sorted by path. bytes = the regular files' sizes. */
int tree_digest(const char *root, char out[65], long long *bytes, long long *entries,
                char why[TREE_ERR_MAX]);

#endif
