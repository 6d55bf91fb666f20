/* Volumes' rows (docs/volumes.md): named storage of one user that outlives sandboxes, and
 * which sandbox mounts which volume where. The bytes live on the host (volumes/). */
#ifndef SBX_STORE_VOLUMES_H
#define SBX_STORE_VOLUMES_H

#include <stdbool.h>

#include "store.h"

/* A volume's name: [A-Za-z0-9_.-], 1..this long, unique per user. */
#define STORE_VOLUME_NAME_MAX 63
/* A mount path inside the sandbox. */
#define STORE_VOLUME_PATH_MAX 255

struct store_volume {
    char id[STORE_ID_MAX + 1];
    char user[AUTH_USER_MAX + 1];
    char name[STORE_VOLUME_NAME_MAX + 1];
    long long size_mb;
    char node_id[STORE_NODE_ID_MAX + 1]; /* where its image lives and is mounted */
    long long created_at;                /* unix seconds */
};

/* -EEXIST (volume_exists) when the user has a volume of that name. */
int store_volume_insert(struct store *s, const struct store_volume *v, struct sbx_err *err);
/* By id or, failing that, by name, among user's volumes (every user's when user is NULL):
 * -ENOENT (volume_not_found) otherwise, another user's volume included. */
int store_volume_get(struct store *s, const char *user, const char *id_or_name,
                     struct store_volume *out, struct sbx_err *err);
typedef void (*store_volume_cb)(const struct store_volume *v, void *data);
/* user's volumes (every user's when NULL), oldest first. */
int store_volume_each(struct store *s, const char *user, store_volume_cb cb, void *data,
                      struct sbx_err *err);
/* Delete it unless a live sandbox mounts it: -EBUSY (volume_in_use) then, under the
 * store's write lock so that no mount is added meanwhile. */
int store_volume_delete(struct store *s, const char *id, struct sbx_err *err);

struct store_volume_mount {
    char sandbox_id[STORE_ID_MAX + 1];
    char volume_id[STORE_ID_MAX + 1];
    char path[STORE_VOLUME_PATH_MAX + 1];
    bool read_only;
};

/* Record sandbox m->sandbox_id's mount; -ENOENT (volume_not_found) when the volume is
 * gone (deleted while the sandbox was being made). */
int store_volume_mount_add(struct store *s, const struct store_volume_mount *m,
                           struct sbx_err *err);
typedef void (*store_volume_mount_cb)(const struct store_volume_mount *m, void *data);
/* A sandbox's mounts, by path. */
int store_volume_mounts_of(struct store *s, const char *sandbox_id, store_volume_mount_cb cb,
                           void *data, struct sbx_err *err);
/* The live sandboxes (as store_sandbox_each_live counts them) mounting a volume. */
int store_volume_mounted_in(struct store *s, const char *volume_id, store_volume_mount_cb cb,
                            void *data, struct sbx_err *err);
/* A fork's copy mounts what its parent mounts. */
int store_volume_mounts_copy(struct store *s, const char *from, const char *to,
                             struct sbx_err *err);

#endif
