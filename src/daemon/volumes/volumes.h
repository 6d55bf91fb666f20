/* Volumes (docs/volumes.md): named storage of one user that outlives sandboxes and is
 * shared between them. A volume is a sparse ext4 image of its size, loop-mounted on the
 * host at <SBX_VOLUMES_DIR>/<id>/data exactly as a workspace's quota image is
 * (sandbox/wsimage.h), so its quota holds for writes from the routes and from inside
 * every sandbox that mounts it. Without workspace images (SBX_WORKSPACE_MB=0) it is a
 * plain directory whose size only the routes enforce.
 *
 * The host mount outlives sbxd (a kill -9 leaves it, and the sandboxes' bind mounts of
 * it, in place); volumes_adopt mounts at start what is not mounted (a reboot).
 *
 * This is the C interface every surface uses (the REST routes in volumes_api.c and
 * volfiles_api.c, sandbox creation, the E2B surface): tenant checks happen here. */
#ifndef SBX_VOLUMES_H
#define SBX_VOLUMES_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../../runtime/rt.h"
#include "../store/volumes.h"

/* How many volumes one sandbox mounts at most. */
#define VOLUMES_PER_SANDBOX_MAX RT_MOUNTS_MAX

struct volumes;

struct volumes_settings {
    const char *dir;      /* where volumes live (SBX_VOLUMES_DIR) */
    const char *data_dir; /* where the formatted templates are kept */
    long long default_mb, max_mb, per_user;
    bool images; /* quota images (the host can loop-mount), else plain directories */
};

int volumes_new(struct store *s, const struct volumes_settings *set, struct volumes **out,
                struct sbx_err *err);
void volumes_free(struct volumes *v);

/* A new volume of user's: name [A-Za-z0-9_.-] 1..STORE_VOLUME_NAME_MAX (invalid_volume),
 * size_mb 0 for the default, at most the maximum (invalid_volume); volume_exists, and
 * volume_limit (409) past the per-user count. */
int volumes_create(struct volumes *v, const char *user, const char *name, long long size_mb,
                   struct store_volume *out, struct sbx_err *err);
/* user's volume by id or name: volume_not_found (404) for another user's. */
int volumes_get(struct volumes *v, const char *user, const char *id_or_name,
                struct store_volume *out, struct sbx_err *err);
/* Delete user's volume and its bytes: volume_in_use (409) while a live sandbox mounts it. */
int volumes_delete(struct volumes *v, const char *user, const char *id_or_name,
                   struct store_volume *out, struct sbx_err *err);
/* The host directory of the volume's root, mounted (again, after a reboot) if it was not;
 * volume_elsewhere (409) for a volume of another node. Caller frees *out. */
int volumes_root(struct volumes *v, const struct store_volume *vol, char **out,
                 struct sbx_err *err);
/* Bytes the volume's files take. */
int volumes_used(struct volumes *v, const struct store_volume *vol, long long *out,
                 struct sbx_err *err);
/* The volume's object: id, name, size, used bytes, where it is mounted now. */
json_t *volumes_to_json(struct volumes *v, const struct store_volume *vol);
/* At start: every volume of this node mounted on the host. Failures are logged per
 * volume by the caller's log: the first one is returned, the rest still tried. */
int volumes_adopt(struct volumes *v, struct sbx_err *err);

/* --- mounts at sandbox creation ------------------------------------------------------ */

/* Is path a place a volume may be mounted: absolute, normalised (no "." / ".." / empty
 * components, no trailing '/'), printable, at most STORE_VOLUME_PATH_MAX, and neither /,
 * the workspace itself nor a system directory (invalid_mount_path). */
int volumes_path_check(const char *path, struct sbx_err *err);
/* A create's "volumes": [{volume, path, read_only?}], checked for shape and paths, no two
 * at the same or nested paths (invalid_volume / invalid_mount_path). NULL is none. */
int volumes_mounts_check(json_t *list, struct sbx_err *err);
/* Can user mount each of a checked list here: volume_not_found, volume_elsewhere. Before
 * anything of a create is written. */
int volumes_mounts_usable(struct volumes *v, const char *user, json_t *list, struct sbx_err *err);
/* Resolve each of a checked list among user's volumes (volume_not_found) and record them
 * as sandbox_id's mounts. */
int volumes_mounts_attach(struct volumes *v, const char *user, json_t *list,
                          const char *sandbox_id, struct sbx_err *err);
/* A sandbox's mounts for its runtime spec: every volume's root mounted. */
struct volumes_mountset {
    struct rt_mount m[VOLUMES_PER_SANDBOX_MAX];
    char *src[VOLUMES_PER_SANDBOX_MAX];
    char dst[VOLUMES_PER_SANDBOX_MAX][STORE_VOLUME_PATH_MAX + 1];
    size_t n;
};
int volumes_mountset_load(struct volumes *v, const char *sandbox_id, struct volumes_mountset *ms,
                          struct sbx_err *err);
void volumes_mountset_clear(struct volumes_mountset *ms);
/* [{volume_id, name, path, read_only}] of a sandbox's mounts, for its object. */
json_t *volumes_mounts_json(struct volumes *v, const char *sandbox_id);

#endif
