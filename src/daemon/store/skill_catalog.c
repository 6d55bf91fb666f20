/* The skill catalog's rows; the bundles themselves are unpacked under <data>/skills/<id>. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

void store_skill_clear(struct store_skill *k)
{
    free(k->description);
    free(k->envs_json);
    memset(k, 0, sizeof(*k));
}

int store_skill_insert(struct store *s, const struct store_skill *k, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO skill_catalog(id,name,version,description,bundle_sha256,"
                     "source,owner,envs,created_at) VALUES(?,?,?,?,?,?,?,?,?)",
                     "tttttttti", k->id, k->name, k->version, k->description, k->bundle_sha256,
                     k->source, k->owner, k->envs_json, k->created_at);
    if (r < 0)
        return r;
    r = db_run(st, err);
    return r == -EEXIST ? sbx_err_set(err, EEXIST, "skill_exists",
                                      "the catalog already has %s version %s", k->name, k->version)
                        : r;
}

static void row(struct db_stmt *st, struct store_skill *k)
{
    const char *d = db_col_text(st, 3), *e = db_col_text(st, 7);
    db_col_copy(st, 0, k->id, sizeof(k->id));
    db_col_copy(st, 1, k->name, sizeof(k->name));
    db_col_copy(st, 2, k->version, sizeof(k->version));
    k->description = sbx_xstrdup(d ? d : "");
    db_col_copy(st, 4, k->bundle_sha256, sizeof(k->bundle_sha256));
    db_col_copy(st, 5, k->source, sizeof(k->source));
    db_col_copy(st, 6, k->owner, sizeof(k->owner));
    k->envs_json = sbx_xstrdup(e ? e : "[]");
    k->created_at = db_col_int64(st, 8);
}

#define COLUMNS "id,name,version,description,bundle_sha256,source,owner,envs,created_at"

int store_skill_get(struct store *s, const char *id, struct store_skill *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r =
        db_query(s->conn, &st, err, "SELECT " COLUMNS " FROM skill_catalog WHERE id=?", "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        row(st, out);
    else if (r == DB_DONE)
        r = sbx_err_set(err, ENOENT, "skill_not_found", "no skill with id %.64s", id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_skill_find(struct store *s, const char *name, const char *version,
                     char id[STORE_SKILL_ID_MAX + 1], struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT id FROM skill_catalog WHERE name=? AND version=?",
                     "tt", name, version);
    if (r < 0)
        return r;
    id[0] = '\0';
    if ((r = db_step(st, err)) == DB_ROW)
        db_col_copy(st, 0, id, STORE_SKILL_ID_MAX + 1);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_skill_each(struct store *s, store_skill_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " COLUMNS " FROM skill_catalog ORDER BY created_at, id", "");
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_skill k = {0};
        row(st, &k);
        cb(&k, data);
        store_skill_clear(&k);
    }
    db_finalize(st);
    return r;
}

int store_skill_delete(struct store *s, const char *id, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "DELETE FROM skill_catalog WHERE id=?", "t", id);
    return r < 0 ? r : db_run(st, err);
}
