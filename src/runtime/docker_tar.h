/* Tar streams for the Docker Engine (libarchive): a host tree (a template's root
 * filesystem for an image import, a new workspace to seed a remote engine's volume) and
 * single files under chosen names (the agent copied into a remote engine's container).
 * Shared by sbxd and sbx-shim. Library code: never logs, never exits. */
#ifndef SBX_RUNTIME_DOCKER_TAR_H
#define SBX_RUNTIME_DOCKER_TAR_H

#include <stddef.h>

/* The tree at dir written to fd as a pax tar, paths relative to dir ("." for dir itself,
 * with its owner and mode), under prefix/ when prefix is not NULL (dir itself then named
 * prefix: the engine applies an entry's owner to a mount point only when it is named),
 * names as raw bytes, not crossing mounts. fd stays open. 0, or -1 with why filled. */
int docker_tar_tree(const char *dir, const char *prefix, int fd, char *why, size_t why_len);

/* Regular files paths[i] written to fd as a pax tar under names[i] (relative), owned by
 * root, mode 0755. fd stays open. 0, or -1 with why filled. */
int docker_tar_files(const char *const *paths, const char *const *names, size_t n, int fd,
                     char *why, size_t why_len);

#endif
