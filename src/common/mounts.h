/* Mounts beneath a directory, for tear-down: a sandbox's workspace may be a loop mount
 * (src/daemon/wsimage.h) that must be detached before its directory can go. */
#ifndef SBX_MOUNTS_H
#define SBX_MOUNTS_H

/* Lazily detach (MNT_DETACH) every mount at or beneath the absolute path dir, deepest
 * first. Returns the number detached, or -errno if the mount table cannot be read. */
int sbx_umount_beneath(const char *dir);

#endif
