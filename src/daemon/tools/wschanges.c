#include "wschanges.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../files/workspace.h"

struct ws_stamp {
    char *path;
    uint64_t size;
    struct timespec mtime;
    ino_t ino;
};

struct ws_listing {
    struct ws_stamp *v;
    size_t n, cap;
    bool truncated;
};

void ws_listing_free(struct ws_listing *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    free(l);
}

static int add_stamp(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct ws_listing *l = data;
    if (e->type != WS_FILE)
        return 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = sbx_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (struct ws_stamp){sbx_xstrdup(e->path), e->size, e->st->st_mtim, e->st->st_ino};
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct ws_stamp *)a)->path, ((const struct ws_stamp *)b)->path);
}

int ws_listing_take(int root, struct ws_listing **out, struct sbx_err *err)
{
    struct ws_listing *l = sbx_xcalloc(1, sizeof(*l));
    if (ws_walk(root, "", true, WSCHANGES_WALK_MAX, add_stamp, l, &l->truncated, err) < 0) {
        ws_listing_free(l);
        return sbx_err_ret(err);
    }
    if (l->n)
        qsort(l->v, l->n, sizeof(*l->v), by_path);
    *out = l;
    return 0;
}

static bool unchanged(const struct ws_listing *before, const struct ws_stamp *now)
{
    if (!before->n)
        return false;
    const struct ws_stamp *was = bsearch(now, before->v, before->n, sizeof(*now), by_path);
    return was && was->size == now->size && was->ino == now->ino &&
           was->mtime.tv_sec == now->mtime.tv_sec && was->mtime.tv_nsec == now->mtime.tv_nsec;
}

struct changes {
    const struct ws_listing *before;
    json_t *files;
    uint64_t hashed;
    bool truncated;
};

static int add_change(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct changes *c = data;
    if (e->type != WS_FILE)
        return 0;
    struct ws_stamp now = {(char *)e->path, e->size, e->st->st_mtim, e->st->st_ino};
    if (unchanged(c->before, &now))
        return 0;
    if (json_array_size(c->files) >= WSCHANGES_FILES_MAX) {
        c->truncated = true;
        return 1;
    }
    json_t *f = json_pack("{s:s,s:I}", "path", e->path, "size", (json_int_t)e->size);
    char sha[WS_SHA256_HEX_LEN + 1];
    uint64_t size;
    struct sbx_err herr = {0};
    /* A file that went away or changed type meanwhile is listed without a digest. */
    if (c->hashed + e->size <= WSCHANGES_HASH_BUDGET &&
        ws_hash_at(e->dir, e->name, sha, &size, &herr) == 0) {
        c->hashed += size;
        json_object_set_new(f, "sha256", json_string(sha));
        json_object_set_new(f, "size", json_integer((json_int_t)size));
    }
    json_array_append_new(c->files, f);
    return 0;
}

static int by_path_json(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                  json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

json_t *ws_listing_changes(const struct ws_listing *before, int root, bool *truncated,
                           struct sbx_err *err)
{
    struct changes c = {.before = before, .files = json_array()};
    bool walk_cut = false;
    if (ws_walk(root, "", true, WSCHANGES_WALK_MAX, add_change, &c, &walk_cut, err) < 0) {
        json_decref(c.files);
        return NULL;
    }
    /* The walk goes directory by directory; the answer is in plain path order. */
    size_t n = json_array_size(c.files);
    json_t **v = sbx_xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(c.files, i));
    if (n)
        qsort(v, n, sizeof(*v), by_path_json);
    json_array_clear(c.files);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(c.files, v[i]);
    free(v);
    *truncated = c.truncated || walk_cut || before->truncated;
    return c.files;
}
