/* Volumes' life cycle on the host and their mounts into sandboxes (volumes.h). */
#include "volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../common/mounts.h"
#include "../../common/sbxuser.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../billing/metrics.h"
#include "../files/workspace.h"
#include "../sandbox/wsimage.h"

/* A walk of a plain-directory volume for its used bytes looks at no more than this. */
#define VOLUMES_WALK_MAX 100000

struct volumes {
    struct store *store;
    char *dir, *data_dir;
    long long default_mb, max_mb, per_user;
    bool images;
};

struct gauge_sums {
    struct volumes *v;
    long long count, size, used;
};

static void sum_one(const struct store_volume *vol, void *data)
{
    struct gauge_sums *g = data;
    long long used = 0;
    if (strcmp(vol->node_id, store_node(g->v->store)))
        return;
    g->count++;
    g->size += vol->size_mb << 20;
    if (volumes_used(g->v, vol, &used, NULL) == 0)
        g->used += used;
}

/* /metrics: this node's volumes, what they may hold and what they hold. */
static void volume_gauges(FILE *out, void *data)
{
    struct gauge_sums g = {.v = data};
    (void)store_volume_each(g.v->store, NULL, sum_one, &g, NULL);
    fprintf(out,
            "# HELP sbx_volumes Volumes on this node (docs/volumes.md)\n"
            "# TYPE sbx_volumes gauge\n"
            "sbx_volumes %lld\n"
            "# HELP sbx_volume_size_bytes What this node's volumes may hold (their quotas)\n"
            "# TYPE sbx_volume_size_bytes gauge\n"
            "sbx_volume_size_bytes %lld\n"
            "# HELP sbx_volume_used_bytes What this node's volumes' files take\n"
            "# TYPE sbx_volume_used_bytes gauge\n"
            "sbx_volume_used_bytes %lld\n",
            g.count, g.size, g.used);
}

int volumes_new(struct store *s, const struct volumes_settings *set, struct volumes **out,
                struct sbx_err *err)
{
    int r = sbx_mkdir_p(set->dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating the volumes directory %s", set->dir);
    struct volumes *v = sbx_xcalloc(1, sizeof(*v));
    v->store = s;
    v->dir = sbx_xstrdup(set->dir);
    v->data_dir = sbx_xstrdup(set->data_dir);
    v->default_mb = set->default_mb;
    v->max_mb = set->max_mb;
    v->per_user = set->per_user;
    v->images = set->images;
    metrics_gauges_add(volume_gauges, v);
    *out = v;
    return 0;
}

void volumes_free(struct volumes *v)
{
    if (!v)
        return;
    metrics_gauges_remove(volume_gauges, v);
    free(v->dir);
    free(v->data_dir);
    free(v);
}

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > STORE_VOLUME_NAME_MAX || name[0] == '.' || name[0] == '-')
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '.' || *c == '-'))
            return false;
    return true;
}

/* <dir>/<id>: volume.img (with images) and data/, the root. */
static char *vol_path(const struct volumes *v, const char *id, const char *what)
{
    return sbx_xasprintf("%s/%s%s%s", v->dir, id, what ? "/" : "", what ? what : "");
}

static bool mounted(const char *dir)
{
    struct stat a, b;
    _cleanup_free_ char *parent = sbx_xasprintf("%s/..", dir);
    return stat(dir, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

static int ensure_root(struct volumes *v, const struct store_volume *vol, const char *root,
                       struct sbx_err *err)
{
    if (!v->images || mounted(root))
        return 0;
    _cleanup_free_ char *image = vol_path(v, vol->id, "volume.img");
    return wsimage_attach(image, root, err);
}

int volumes_root(struct volumes *v, const struct store_volume *vol, char **out,
                 struct sbx_err *err)
{
    if (strcmp(vol->node_id, store_node(v->store)))
        return sbx_err_set(err, EXDEV, "volume_elsewhere",
                           "volume %s lives on node %s; its sandboxes and files are served there",
                           vol->name, vol->node_id);
    char *root = vol_path(v, vol->id, "data");
    int r = ensure_root(v, vol, root, err);
    if (r < 0) {
        free(root);
        return r;
    }
    *out = root;
    return 0;
}

static void count_one(const struct store_volume *vol, void *data)
{
    ++*(long long *)data;
}

int volumes_create(struct volumes *v, const char *user, const char *name, long long size_mb,
                   struct store_volume *out, struct sbx_err *err)
{
    if (!name_ok(name))
        return sbx_err_set(err, EINVAL, "invalid_volume",
                           "name must be 1 to %d characters of A-Z a-z 0-9 _ . - (not starting "
                           "with . or -)",
                           STORE_VOLUME_NAME_MAX);
    if (size_mb == 0)
        size_mb = v->default_mb;
    if (size_mb < 16 || size_mb > v->max_mb)
        return sbx_err_set(err, EINVAL, "invalid_volume", "size_mb must be from 16 to %lld",
                           v->max_mb);
    long long have = 0;
    int r = store_volume_each(v->store, user, count_one, &have, err);
    if (r < 0)
        return r;
    if (have >= v->per_user)
        return sbx_err_set(err, EDQUOT, "volume_limit",
                           "at most %lld volumes per user: delete one first", v->per_user);
    struct store_volume vol = {.size_mb = size_mb, .created_at = sbx_wall_ms() / 1000};
    sbx_random_id("vol_", 10, vol.id, sizeof(vol.id));
    snprintf(vol.user, sizeof(vol.user), "%s", user);
    snprintf(vol.name, sizeof(vol.name), "%s", name);
    snprintf(vol.node_id, sizeof(vol.node_id), "%s", store_node(v->store));

    /* The bytes first, then the row: a row always has its image. */
    _cleanup_free_ char *dir = vol_path(v, vol.id, NULL);
    _cleanup_free_ char *root = vol_path(v, vol.id, "data");
    if ((r = sbx_mkdir_p(root, 0755)) < 0)
        return sbx_err_sys(err, -r, "creating %s", root);
    if (v->images) {
        _cleanup_free_ char *tpl = NULL;
        _cleanup_free_ char *image = vol_path(v, vol.id, "volume.img");
        if ((r = wsimage_prepare(v->data_dir, size_mb, &tpl, err)) < 0 ||
            (r = wsimage_mount(tpl, image, root, err)) < 0)
            goto fail;
    }
    /* The sandbox's user writes there (docs/security.md: commands run as it). */
    (void)chown(root, SBX_USER_UID, SBX_USER_GID);
    if ((r = store_volume_insert(v->store, &vol, err)) < 0)
        goto fail;
    *out = vol;
    return 0;
fail:
    (void)sbx_umount_beneath(dir);
    (void)sbx_rm_rf(dir);
    return r;
}

int volumes_get(struct volumes *v, const char *user, const char *id_or_name,
                struct store_volume *out, struct sbx_err *err)
{
    return store_volume_get(v->store, user, id_or_name, out, err);
}

int volumes_delete(struct volumes *v, const char *user, const char *id_or_name,
                   struct store_volume *out, struct sbx_err *err)
{
    int r = store_volume_get(v->store, user, id_or_name, out, err);
    if (r < 0 || (r = store_volume_delete(v->store, out->id, err)) < 0)
        return r;
    /* The row is gone: the bytes go with it. A sandbox that just ended may still hold
     * the mount for a moment; the lazy detach lets the loop device go with it. */
    _cleanup_free_ char *dir = vol_path(v, out->id, NULL);
    (void)sbx_umount_beneath(dir);
    (void)sbx_rm_rf(dir);
    return 0;
}

struct usage {
    long long bytes;
};

static int add_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    ((struct usage *)data)->bytes += (long long)e->st->st_blocks * 512;
    return 0;
}

int volumes_used(struct volumes *v, const struct store_volume *vol, long long *out,
                 struct sbx_err *err)
{
    _cleanup_free_ char *root = NULL;
    int r = volumes_root(v, vol, &root, err);
    if (r < 0)
        return r;
    if (v->images) {
        struct statvfs s;
        if (statvfs(root, &s) < 0)
            return sbx_err_sys(err, errno, "measuring volume %s", vol->id);
        *out = (long long)(s.f_blocks - s.f_bfree) * (long long)s.f_frsize;
        return 0;
    }
    _cleanup_close_ int fd = -1;
    struct usage u = {0};
    bool truncated = false;
    if ((r = ws_open_root(root, &fd, err)) < 0 ||
        (r = ws_walk(fd, "", true, VOLUMES_WALK_MAX, add_entry, &u, &truncated, err)) < 0)
        return r;
    *out = u.bytes;
    return 0;
}

static void add_mount(const struct store_volume_mount *m, void *data)
{
    json_array_append_new(data, json_pack("{s:s,s:s,s:b}", "sandbox_id", m->sandbox_id, "path",
                                          m->path, "read_only", m->read_only));
}

json_t *volumes_to_json(struct volumes *v, const struct store_volume *vol)
{
    json_t *in = json_array();
    (void)store_volume_mounted_in(v->store, vol->id, add_mount, in, NULL);
    json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:o}", "id", vol->id, "object", "volume",
                          "name", vol->name, "size_mb", (json_int_t)vol->size_mb, "size_bytes",
                          (json_int_t)vol->size_mb << 20, "created_at",
                          (json_int_t)vol->created_at, "node", vol->node_id, "mounted_in", in);
    long long used = 0;
    struct sbx_err err = {0};
    /* Another node's volume is measured there: null here. */
    json_object_set_new(j, "used_bytes",
                        volumes_used(v, vol, &used, &err) == 0 ? json_integer(used) : json_null());
    return j;
}

struct adopt {
    struct volumes *v;
    int ret;
    struct sbx_err *err;
};

static void adopt_one(const struct store_volume *vol, void *data)
{
    struct adopt *a = data;
    if (strcmp(vol->node_id, store_node(a->v->store)))
        return;
    _cleanup_free_ char *root = vol_path(a->v, vol->id, "data");
    struct sbx_err e = {0};
    int r = ensure_root(a->v, vol, root, &e);
    if (r < 0 && a->ret == 0) {
        a->ret = r;
        *a->err = e;
    }
}

int volumes_adopt(struct volumes *v, struct sbx_err *err)
{
    struct adopt a = {v, 0, err};
    int r = store_volume_each(v->store, NULL, adopt_one, &a, err);
    return r < 0 ? r : a.ret;
}

/* --- mounts at sandbox creation ------------------------------------------------------ */

int volumes_path_check(const char *path, struct sbx_err *err)
{
    /* What a volume may not hide: the sandbox's own machinery and the template's system. */
    static const char *const reserved[] = {"/bin",  "/boot", "/dev",  "/etc", "/lib",
                                           "/lib32", "/lib64", "/libx32", "/opt/sbx",
                                           "/proc", "/root", "/run",  "/sbin", "/sys",
                                           "/tmp",  "/usr",  "/var"};
    static const char *const whole[] = {"/workspace", "/home/user", "/home", "/opt",
                                        "/workspace/out", "/home/user/out"};
    size_t n = path ? strlen(path) : 0;
    if (!path || path[0] != '/' || n < 2 || n > STORE_VOLUME_PATH_MAX || path[n - 1] == '/')
        return sbx_err_set(err, EINVAL, "invalid_mount_path",
                           "a volume's path must be absolute, not /, at most %d bytes, without "
                           "a trailing /",
                           STORE_VOLUME_PATH_MAX);
    for (const char *c = path; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == ':' || *c == ',')
            return sbx_err_set(err, EINVAL, "invalid_mount_path",
                               "a volume's path has no control characters, ':' or ','");
    for (const char *c = path; *c; c++) {
        if (*c != '/')
            continue;
        const char *s = c + 1;
        size_t len = strcspn(s, "/");
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return sbx_err_set(err, EINVAL, "invalid_mount_path",
                               "%.64s: no empty, . or .. components", path);
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(whole); i++)
        if (!strcmp(path, whole[i]))
            return sbx_err_set(err, EINVAL, "invalid_mount_path",
                               "%s is the sandbox's own; mount volumes beneath it or elsewhere",
                               path);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(reserved); i++) {
        size_t k = strlen(reserved[i]);
        if (!strncmp(path, reserved[i], k) && (path[k] == '\0' || path[k] == '/'))
            return sbx_err_set(err, EINVAL, "invalid_mount_path",
                               "%.64s is a system directory (%s)", path, reserved[i]);
    }
    /* Artifacts are collected from the workspace's out/ (docs/files.md). */
    if (!strncmp(path, "/workspace/out/", 15) || !strncmp(path, "/home/user/out/", 15))
        return sbx_err_set(err, EINVAL, "invalid_mount_path",
                           "%.64s: out/ holds the sandbox's artifacts", path);
    return 0;
}

/* One of two paths is the other or beneath it. */
static bool nested(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), k = la < lb ? la : lb;
    return !strncmp(a, b, k) && (la == lb || (la < lb ? b[la] : a[lb]) == '/');
}

int volumes_mounts_check(json_t *list, struct sbx_err *err)
{
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list) || json_array_size(list) > VOLUMES_PER_SANDBOX_MAX)
        return sbx_err_set(err, EINVAL, "invalid_volume",
                           "volumes must be an array of at most %d {volume, path, read_only}",
                           VOLUMES_PER_SANDBOX_MAX);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        json_t *vol = json_object_get(e, "volume"), *path = json_object_get(e, "path"),
               *ro = json_object_get(e, "read_only");
        if (!json_is_object(e) || !json_is_string(vol) || !json_string_length(vol) ||
            json_string_length(vol) > STORE_ID_MAX + STORE_VOLUME_NAME_MAX ||
            !json_is_string(path) || (ro && !json_is_null(ro) && !json_is_boolean(ro)))
            return sbx_err_set(err, EINVAL, "invalid_volume",
                               "volumes[%zu] must be {volume: id or name, path, read_only?}", i);
        int r = volumes_path_check(json_string_value(path), err);
        if (r < 0)
            return sbx_err_wrap(err, "volumes[%zu]", i);
        for (size_t k = 0; k < i; k++)
            if (nested(json_string_value(path),
                       json_string_value(json_object_get(json_array_get(list, k), "path"))))
                return sbx_err_set(err, EINVAL, "invalid_mount_path",
                                   "volumes[%zu]: %.64s is at or beneath another volume's path",
                                   i, json_string_value(path));
    }
    return 0;
}

int volumes_mounts_usable(struct volumes *v, const char *user, json_t *list, struct sbx_err *err)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        struct store_volume vol;
        _cleanup_free_ char *root = NULL;
        int r = store_volume_get(v->store, user, json_string_value(json_object_get(e, "volume")),
                                 &vol, err);
        if (r < 0 || (r = volumes_root(v, &vol, &root, err)) < 0)
            return r;
    }
    return 0;
}

int volumes_mounts_attach(struct volumes *v, const char *user, json_t *list,
                          const char *sandbox_id, struct sbx_err *err)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        struct store_volume vol;
        int r = store_volume_get(v->store, user, json_string_value(json_object_get(e, "volume")),
                                 &vol, err);
        _cleanup_free_ char *root = NULL;
        if (r < 0 || (r = volumes_root(v, &vol, &root, err)) < 0)
            return r;
        struct store_volume_mount m = {.read_only = json_is_true(json_object_get(e, "read_only"))};
        snprintf(m.sandbox_id, sizeof(m.sandbox_id), "%s", sandbox_id);
        snprintf(m.volume_id, sizeof(m.volume_id), "%s", vol.id);
        snprintf(m.path, sizeof(m.path), "%s", json_string_value(json_object_get(e, "path")));
        if ((r = store_volume_mount_add(v->store, &m, err)) < 0)
            return r;
    }
    return 0;
}

struct load {
    struct volumes *v;
    struct volumes_mountset *ms;
    int ret;
    struct sbx_err *err;
};

static void load_one(const struct store_volume_mount *m, void *data)
{
    struct load *l = data;
    struct volumes_mountset *ms = l->ms;
    if (l->ret < 0)
        return;
    if (ms->n >= VOLUMES_PER_SANDBOX_MAX) {
        l->ret = sbx_err_set(l->err, E2BIG, "internal", "more than %d volumes",
                             VOLUMES_PER_SANDBOX_MAX);
        return;
    }
    struct store_volume vol;
    char *root = NULL;
    if ((l->ret = store_volume_get(l->v->store, NULL, m->volume_id, &vol, l->err)) < 0 ||
        (l->ret = volumes_root(l->v, &vol, &root, l->err)) < 0)
        return;
    size_t i = ms->n++;
    ms->src[i] = root;
    snprintf(ms->dst[i], sizeof(ms->dst[i]), "%s", m->path);
    ms->m[i] = (struct rt_mount){.source = root, .destination = ms->dst[i], .read_only = m->read_only};
}

int volumes_mountset_load(struct volumes *v, const char *sandbox_id, struct volumes_mountset *ms,
                          struct sbx_err *err)
{
    memset(ms, 0, sizeof(*ms));
    if (!v)
        return 0;
    struct load l = {v, ms, 0, err};
    int r = store_volume_mounts_of(v->store, sandbox_id, load_one, &l, err);
    if (r == 0)
        r = l.ret;
    if (r < 0)
        volumes_mountset_clear(ms);
    return r;
}

void volumes_mountset_clear(struct volumes_mountset *ms)
{
    for (size_t i = 0; i < ms->n; i++)
        free(ms->src[i]);
    memset(ms, 0, sizeof(*ms));
}

struct mj {
    struct volumes *v;
    json_t *list;
};

static void mount_json(const struct store_volume_mount *m, void *data)
{
    struct mj *x = data;
    struct store_volume vol;
    bool have = store_volume_get(x->v->store, NULL, m->volume_id, &vol, NULL) == 0;
    json_array_append_new(x->list, json_pack("{s:s,s:s,s:s,s:b}", "volume_id", m->volume_id,
                                             "name", have ? vol.name : "", "path", m->path,
                                             "read_only", m->read_only));
}

json_t *volumes_mounts_json(struct volumes *v, const char *sandbox_id)
{
    struct mj x = {v, json_array()};
    if (v)
        (void)store_volume_mounts_of(v->store, sandbox_id, mount_json, &x, NULL);
    return x.list;
}
