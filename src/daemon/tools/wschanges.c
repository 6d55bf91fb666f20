#include "wschanges.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../files/workspace.h"

struct ws_stamp {
    char *path;
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t ino;
};

struct ws_listing {
    struct ws_stamp *v;
    size_t n, cap;
    bool sorted;
    bool truncated;
};

struct ws_listing *ws_listing_new(void)
{
    return sbx_xcalloc(1, sizeof(struct ws_listing));
}

void ws_listing_free(struct ws_listing *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    free(l);
}

void ws_listing_add(struct ws_listing *l, const char *path, uint64_t size, int64_t mtime_ns,
                    int64_t ctime_ns, uint64_t ino)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = sbx_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (struct ws_stamp){sbx_xstrdup(path), size, mtime_ns, ctime_ns, ino};
    l->sorted = false;
}

void ws_listing_set_truncated(struct ws_listing *l)
{
    l->truncated = true;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct ws_stamp *)a)->path, ((const struct ws_stamp *)b)->path);
}

static void sort(struct ws_listing *l)
{
    if (!l->sorted && l->n)
        qsort(l->v, l->n, sizeof(*l->v), by_path);
    l->sorted = true;
}

static int64_t ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int add_stamp(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    if (e->type == WS_FILE)
        ws_listing_add(data, e->path, e->size, ns(e->st->st_mtim), ns(e->st->st_ctim),
                       e->st->st_ino);
    return 0;
}

int ws_listing_take(int root, struct ws_listing **out, struct sbx_err *err)
{
    struct ws_listing *l = ws_listing_new();
    if (ws_walk(root, "", true, WSCHANGES_WALK_MAX, add_stamp, l, &l->truncated, err) < 0) {
        ws_listing_free(l);
        return sbx_err_ret(err);
    }
    sort(l);
    *out = l;
    return 0;
}

static bool unchanged(const struct ws_listing *before, const struct ws_stamp *now)
{
    if (!before->n)
        return false;
    const struct ws_stamp *was = bsearch(now, before->v, before->n, sizeof(*now), by_path);
    return was && was->size == now->size && was->ino == now->ino &&
           was->mtime_ns == now->mtime_ns && was->ctime_ns == now->ctime_ns;
}

json_t *ws_listing_diff(struct ws_listing *before, struct ws_listing *now, bool *truncated)
{
    json_t *files = json_array();
    bool cut = false;
    sort(before);
    sort(now);
    for (size_t i = 0; i < now->n; i++) {
        if (unchanged(before, &now->v[i]))
            continue;
        if (json_array_size(files) >= WSCHANGES_FILES_MAX) {
            cut = true;
            break;
        }
        json_array_append_new(files, json_pack("{s:s,s:I}", "path", now->v[i].path, "size",
                                               (json_int_t)now->v[i].size));
    }
    *truncated = cut || now->truncated || before->truncated;
    return files;
}

json_t *ws_listing_changes(struct ws_listing *before, int root, bool *truncated,
                           struct sbx_err *err)
{
    struct ws_listing *now;
    if (ws_listing_take(root, &now, err) < 0)
        return NULL;
    json_t *files = ws_listing_diff(before, now, truncated), *f;
    ws_listing_free(now);
    uint64_t hashed = 0;
    size_t i;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        uint64_t size = (uint64_t)json_integer_value(json_object_get(f, "size")), n;
        char sha[WS_SHA256_HEX_LEN + 1];
        struct sbx_err herr = {0};
        _cleanup_close_ int fd = -1;
        /* A file that went away or changed type meanwhile is listed without a digest. */
        if (hashed + size > WSCHANGES_HASH_BUDGET ||
            ws_open_file(root, path, &fd, &size, &herr) < 0 ||
            ws_sha256_fd(fd, -1, sha, &n, &herr) < 0)
            continue;
        hashed += n;
        json_object_set_new(f, "sha256", json_string(sha));
        json_object_set_new(f, "size", json_integer((json_int_t)n));
    }
    return files;
}
