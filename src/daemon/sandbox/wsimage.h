/* The workspace quota: each sandbox's workspace is a sparse ext4 image of the quota's
 * size, loop-mounted on the host at <sandbox dir>/workspace (and from there bind-mounted
 * into the sandbox). A write past the quota then fails with ENOSPC wherever it comes
 * from — an upload through sbxd or a command inside — and freeing files frees space.
 * The image is cloned from a template formatted once per data dir and size, so creating
 * a sandbox runs no mkfs. Unmounting is the shim's job (sbx_umount_beneath) before it
 * removes the sandbox dir. */
#ifndef SBX_WSIMAGE_H
#define SBX_WSIMAGE_H

#include "../../common/err.h"

/* Format <data_dir>/workspace-<mb>m.ext4 unless it exists; *template_out is its path. */
int wsimage_prepare(const char *data_dir, long long mb, char **template_out, struct sbx_err *err);

/* Clone the template (or another workspace's image: a fork, a v1 snapshot) to image
 * (sparse), attach it to a free loop device (auto-cleared
 * when unmounted) and mount it nosuid,nodev at mountpoint. */
int wsimage_mount(const char *template_path, const char *image, const char *mountpoint,
                  struct sbx_err *err);

/* Mount an existing image (a volume's, docs/volumes.md) at mountpoint the same way. */
int wsimage_attach(const char *image, const char *mountpoint, struct sbx_err *err);

/* cp -a of a directory's contents: a workspace without the quota image (a fork's copy,
 * a v1 snapshot, a create from one). */
int wsimage_copy_tree(const char *from, const char *to, struct sbx_err *err);

/* Hold the workspace filesystem at mountpoint still (FIFREEZE) while it is copied: the fd
 * that holds it, for wsimage_thaw, or a negative errno. */
int wsimage_freeze(const char *mountpoint);
/* Let it change again and close fd; harmless on a negative fd. */
void wsimage_thaw(int fd);
/* A freeze outlives the process that asked for it: thaw one a killed sbxd left. 1 when it
 * was frozen, 0 when not (EINVAL, the usual answer), or a negative errno. */
int wsimage_thaw_left(const char *mountpoint);

#endif
