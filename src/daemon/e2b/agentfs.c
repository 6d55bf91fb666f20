#include "agentfs.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../sandbox/agentcall.h"
#include "agentfs_src.h"
#include "envd.h"

/* How long one operation may take in the sandbox (a deep listing, a large read). */
#define AGENTFS_TIMEOUT_MS 60000

struct agentfs {
    struct agentcall *call;
    agentfs_done_fn done;
    void *data;
    bool raw; /* "read": stdout is the file's bytes */
    bool overflow;
    uint8_t *buf;
    size_t len, cap;
};

static void fs_free(struct agentfs *f)
{
    free(f->buf);
    free(f);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct agentfs *f = data;
    if (ch != PROTO_CH_STDOUT || f->overflow)
        return;
    if (f->len + len > AGENTFS_OUT_MAX) {
        f->overflow = true;
        return;
    }
    if (f->len + len > f->cap) {
        f->cap = f->len + len > 2 * f->cap ? f->len + len : 2 * f->cap;
        f->buf = sbx_xrealloc(f->buf, f->cap);
    }
    memcpy(f->buf + f->len, buf, len);
    f->len += len;
}

/* The helper's errno as our error code (envd's answers for the same failures). */
static void errno_error(json_t *o, struct sbx_err *err)
{
    int e = (int)json_integer_value(json_object_get(o, "errno"));
    const char *msg = json_string_value(json_object_get(o, "message")) ?: "failed";
    const char *code = e == ENOENT                            ? "file_not_found"
                       : e == EACCES || e == EPERM || e == EROFS ? "path_permission_denied"
                       : e == EEXIST                          ? "dir_exists"
                       : e == ENOTDIR || e == EISDIR || e == EINVAL || e == ENAMETOOLONG ||
                               e == ELOOP
                           ? "invalid_path"
                       : e == EFBIG ? "file_too_large"
                                    : "internal";
    sbx_err_set(err, e, code, "%s", msg);
}

static void on_done(json_t *result, const struct sbx_err *aerr, void *data)
{
    struct agentfs *f = data;
    struct sbx_err err = {0};
    json_t *o = NULL;
    if (aerr) {
        f->done(NULL, NULL, 0, aerr, f->data);
        fs_free(f);
        return;
    }
    long long code = json_integer_value(json_object_get(result, "exit_code"));
    if (f->overflow) {
        sbx_err_set(&err, EFBIG, "file_too_large", "the answer is larger than %u bytes",
                    AGENTFS_OUT_MAX);
    } else if (code == 0 && f->raw) {
        f->done(NULL, f->buf, f->len, NULL, f->data);
        fs_free(f);
        return;
    } else if ((code == 0 || code == 3) &&
               (o = json_loadb((const char *)f->buf, f->len, 0, NULL)) && json_is_object(o)) {
        if (code == 3)
            errno_error(o, &err);
    } else {
        sbx_err_set(&err, EIO, "internal", "the file helper failed (exit %lld)", code);
    }
    f->done(err.code[0] ? NULL : json_object_get(o, "ok"), NULL, 0, err.code[0] ? &err : NULL,
            f->data);
    json_decref(o);
    fs_free(f);
}

static const struct agentcall_ops fs_ops = {.on_data = on_data, .on_done = on_done};

int agentfs_start(struct sandbox *sb, const char *user, json_t *req, agentfs_done_fn done,
                  void *data, struct agentfs **out, struct sbx_err *err)
{
    json_object_set_new(req, "max", json_integer(AGENTFS_LIST_MAX));
    if (!strcmp(json_string_value(json_object_get(req, "op")) ?: "", "read"))
        json_object_set_new(req, "max", json_integer(AGENTFS_OUT_MAX));
    _cleanup_free_ char *arg = json_dumps(req, JSON_COMPACT);
    struct agentfs *f = sbx_xcalloc(1, sizeof(*f));
    f->done = done;
    f->data = data;
    f->raw = !strcmp(json_string_value(json_object_get(req, "op")), "read");
    json_decref(req);
    /* -I: the user's PYTHON* variables and site packages cannot change what the helper does. */
    json_t *op = json_pack("{s:s,s:[s,s,s,s,s],s:I}", "op", "exec", "argv", "python3", "-I",
                           "-c", agentfs_src, arg, "timeout_ms", (json_int_t)AGENTFS_TIMEOUT_MS);
    if (user) {
        json_object_set_new(op, "user", json_string(user));
        if (!strcmp(user, "root"))
            json_object_set_new(op, "env", json_pack("[s]", "HOME=/root"));
    }
    if (agentcall_start(sb, op, &fs_ops, f, &f->call, err) < 0) {
        fs_free(f);
        return -EIO;
    }
    if (out)
        *out = f;
    return 0;
}

void agentfs_cancel(struct agentfs *f)
{
    agentcall_cancel(f->call, false);
    fs_free(f);
}

json_t *agentfs_entry(json_t *row)
{
    struct stat st = {0};
    st.st_mode = (mode_t)json_integer_value(json_array_get(row, 1));
    st.st_size = (off_t)json_integer_value(json_array_get(row, 2));
    long long ns = json_integer_value(json_array_get(row, 3));
    st.st_mtim.tv_sec = (time_t)(ns / 1000000000);
    st.st_mtim.tv_nsec = (long)(ns % 1000000000);
    long long uid = json_integer_value(json_array_get(row, 4));
    char owner[24];
    snprintf(owner, sizeof(owner), "%s", uid == 0 ? "root" : uid == 1000 ? "user" : "");
    if (!*owner)
        snprintf(owner, sizeof(owner), "%lld", uid);
    return e2b_entry_at(json_string_value(json_array_get(row, 0)) ?: "", &st,
                        json_string_value(json_array_get(row, 6)), owner);
}
