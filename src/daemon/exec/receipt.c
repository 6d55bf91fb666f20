#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/manager.h"
#include "../store/store.h"
#include "../files/agentfs.h"
#include "../files/agentws.h"
#include "../files/exportrd.h"
#include "../files/listing.h"
#include "../files/workspace.h"

/* Walk root/sub with ws_walk (beneath the workspace fd, never following links). A
 * missing directory is an empty one. Returns false when the walk was cut short. */
static bool walk(const char *workspace, const char *sub, ws_walk_fn fn, void *data)
{
    struct sbx_err err = {0};
    _cleanup_close_ int root = -1;
    if (ws_open_root(workspace, &root, &err) < 0)
        return true;
    bool truncated = false;
    (void)ws_walk(root, sub, true, WS_WALK_MAX_ENTRIES, fn, data, &truncated, &err);
    return !truncated;
}

/* --- the generation counter -------------------------------------------------------- */

static int fingerprint_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    const struct stat *st = e->st;
    char line[128];
    int n = snprintf(line, sizeof(line), "|%o|%lld|%lld.%09ld|", (unsigned)st->st_mode,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    EVP_DigestUpdate(data, e->path, strlen(e->path) + 1);
    EVP_DigestUpdate(data, line, (size_t)n);
    return 0;
}

static void fingerprint(const char *workspace, char out[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    (void)walk(workspace, "", fingerprint_entry, md);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_DigestFinal_ex(md, d, &dlen);
    EVP_MD_CTX_free(md);
    sbx_hex(d, dlen, out);
}

/* Move the generation if the workspace's fingerprint is not the last one seen. */
static long long generation_apply(struct sandbox *sb, const char now[65])
{
    struct store *st = manager_store(sb->mgr);
    struct sbx_err err = {0};
    if (!sb->ws_fingerprint[0] && sb->ws_generation == 0 &&
        store_ws_get(st, sb->rec.id, &sb->ws_generation, sb->ws_fingerprint, &err) < 0)
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
    if (strcmp(now, sb->ws_fingerprint)) {
        sb->ws_generation++;
        memcpy(sb->ws_fingerprint, now, 65);
        if (store_ws_set(st, sb->rec.id, sb->ws_generation, now, &err) < 0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
    }
    return sb->ws_generation;
}

long long receipt_sync_generation(struct sandbox *sb)
{
    char now[65];
    fingerprint(sb->workspace, now);
    return generation_apply(sb, now);
}

/* --- probe and receipt ----------------------------------------------------------------- */

struct out_entry {
    char *path;
    long long size, mtime_ns, ctime_ns;
    unsigned long long ino;
};

struct out_list {
    struct out_entry *v;
    size_t n, cap;
};

struct receipt_probe {
    long long gen_before;
    char command_sha256[65];
    char *language;
    struct out_list before;
    json_t *warnings;
    /* A workspace not on this host: the walks and the reading back of the outputs. */
    struct sandbox *sb;
    struct agentfs *scan;
    struct agentfs_stream *rd;
    receipt_ready_fn ready;
    receipt_built_fn built;
    void *data;
    char exec_id[64];
    long long gen_after;
    json_t *outputs;  /* while building: the outputs hashed so far */
    json_t *changed;  /* ... and the paths asked for (export_name_json) */
    json_t *sent;     /* ... and those the helper sent, the same way */
    struct export_reader reader;
    EVP_MD_CTX *md;   /* the file being read back */
    char *cur;
    uint64_t cur_size;
    struct sbx_err rd_err; /* the first failure of the reading back */
};

static int note_out(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct out_list *l = data;
    const struct stat *st = e->st;
    if (!S_ISREG(st->st_mode))
        return 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = sbx_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (struct out_entry){
        .path = sbx_xstrdup(e->path),
        .size = st->st_size,
        .mtime_ns = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
        .ctime_ns = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
        .ino = st->st_ino,
    };
    return 0;
}

static void out_list_clear(struct out_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static const struct out_entry *find_out(const struct out_list *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].path, path))
            return &l->v[i];
    return NULL;
}

static struct receipt_probe *probe_alloc(const char *command, const char *language)
{
    struct receipt_probe *probe = sbx_xcalloc(1, sizeof(*probe));
    probe->warnings = json_array();
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    const char *cmd = command ? command : "";
    if (EVP_Digest(cmd, strlen(cmd), d, &dlen, EVP_sha256(), NULL) != 1)
        abort();
    sbx_hex(d, dlen, probe->command_sha256);
    probe->language = sbx_xstrdup(language ? language : "shell");
    return probe;
}

int receipt_probe_new(struct sandbox *sb, const char *command, const char *language,
                      struct receipt_probe **out, struct sbx_err *err)
{
    struct receipt_probe *probe = probe_alloc(command, language);
    probe->gen_before = receipt_sync_generation(sb);
    if (!walk(sb->workspace, "out", note_out, &probe->before))
        json_array_append_new(probe->warnings,
                              json_string("/workspace/out has too many entries to compare"));
    *out = probe;
    return 0;
}

void receipt_probe_free(struct receipt_probe *probe)
{
    if (!probe)
        return;
    if (probe->scan)
        agentfs_cancel(probe->scan);
    if (probe->rd)
        agentfs_stream_cancel(probe->rd);
    out_list_clear(&probe->before);
    free(probe->language);
    json_decref(probe->warnings);
    json_decref(probe->outputs);
    json_decref(probe->changed);
    json_decref(probe->sent);
    EVP_MD_CTX_free(probe->md);
    free(probe->cur);
    free(probe);
}

struct build {
    const struct out_list *before;
    json_t *outputs;
    json_t *warnings;
};

/* {path, sha256, size}: a receipt's output, the same from a host walk and through the
 * agent (a name that is not UTF-8 shown as files_path_set does). */
static json_t *output_json(const char *path, const char *sha, uint64_t size)
{
    json_t *o = json_object();
    files_path_set(o, path);
    json_object_set_new(o, "sha256", json_string(sha));
    json_object_set_new(o, "size", json_integer((json_int_t)size));
    return o;
}

static int add_output(const struct ws_entry *e, void *data, struct sbx_err *unused)
{
    struct build *b = data;
    const struct stat *st = e->st;
    const char *rel = e->path;
    if (!S_ISREG(st->st_mode))
        return 0;
    const struct out_entry *was = find_out(b->before, rel);
    long long mt = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    long long ct = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    if (was && was->size == st->st_size && was->mtime_ns == mt && was->ctime_ns == ct &&
        was->ino == st->st_ino)
        return 0;
    if (json_array_size(b->outputs) >= RECEIPT_MAX_OUTPUTS) {
        if (json_array_size(b->warnings) == 0)
            json_array_append_new(b->warnings, json_string("more outputs than a receipt lists"));
        return 0;
    }
    char sha[65];
    uint64_t size = 0;
    struct sbx_err err = {0};
    if (ws_hash_at(e->dir, e->name, sha, &size, &err) < 0) {
        json_array_append_new(b->warnings, json_sprintf("%s: %s", rel, err.msg));
        return 0;
    }
    json_array_append_new(b->outputs, output_json(rel, sha, size));
    return 0;
}

/* The receipt: outputs and warnings are stolen. */
static json_t *receipt_doc(const struct receipt_probe *probe, const struct sandbox *sb,
                           const char *exec_id, json_t *outputs, json_t *warnings,
                           long long gen_after)
{
    json_t *r = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:[],s:o,s:I,s:I}", "exec_id", exec_id,
                          "sandbox_id", sb->rec.id, "template", sb->rec.template_name,
                          "image_digest", sb->rec.template_digest, "language", probe->language,
                          "command_sha256", probe->command_sha256, "inputs", "outputs",
                          outputs, "workspace_generation_before",
                          (json_int_t)probe->gen_before, "workspace_generation_after",
                          (json_int_t)gen_after);
    if (json_array_size(warnings))
        json_object_set(r, "warnings", warnings);
    json_decref(warnings);
    return r;
}

json_t *receipt_build(struct receipt_probe *probe, struct sandbox *sb, const char *exec_id)
{
    struct build b = {.before = &probe->before, .outputs = json_array(),
                      .warnings = json_copy(probe->warnings)};
    (void)walk(sb->workspace, "out", add_output, &b);
    long long gen_after = receipt_sync_generation(sb);
    return receipt_doc(probe, sb, exec_id, b.outputs, b.warnings, gen_after);
}

/* --- a workspace not on this host ------------------------------------------------------
 * The same walks run inside the sandbox (the file helper's "wsscan": the fingerprint of
 * the tree, and the state of every regular file under out/); the files that changed are
 * then read back (its "export" of those paths) and hashed here, as the bytes arrive, so a
 * receipt's hashes are sbxd's, not the sandbox's word. */

static void probe_warn(struct receipt_probe *probe, const char *what, const struct sbx_err *err)
{
    json_array_append_new(probe->warnings, json_sprintf("%s: %s", what, err->msg));
}

/* The helper's scan: the fingerprint moves the generation, and out/'s files are listed. */
static int scan_take(struct receipt_probe *probe, json_t *ok, struct out_list *l,
                     long long *gen)
{
    const char *fp = json_string_value(json_object_get(ok, "fingerprint"));
    json_t *outs = json_object_get(ok, "out");
    if (!fp || strlen(fp) != 64 || !json_is_array(outs))
        return -EPROTO;
    if (json_is_true(json_object_get(ok, "truncated")))
        json_array_append_new(probe->warnings,
                              json_string("/workspace has too many entries to compare"));
    size_t i;
    json_t *e;
    json_array_foreach(outs, i, e)
    {
        char *path = export_name_of(json_array_get(e, 0));
        if (!path || json_array_size(e) != 5) {
            free(path);
            return -EPROTO;
        }
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 64;
            l->v = sbx_xrealloc(l->v, l->cap * sizeof(*l->v));
        }
        l->v[l->n++] = (struct out_entry){
            .path = path,
            .size = json_integer_value(json_array_get(e, 1)),
            .mtime_ns = json_integer_value(json_array_get(e, 2)),
            .ctime_ns = json_integer_value(json_array_get(e, 3)),
            .ino = (unsigned long long)json_integer_value(json_array_get(e, 4)),
        };
    }
    char now[65];
    memcpy(now, fp, 65);
    *gen = generation_apply(probe->sb, now);
    return 0;
}

static json_t *scan_req(void)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:i}", "op", "wsscan", "path", AGENTWS_ROOT, "root",
                     AGENTWS_ROOT, "out", SANDBOX_OUT_DIR, "max", WS_WALK_MAX_ENTRIES);
}

static void before_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                        void *data)
{
    struct receipt_probe *probe = data;
    struct sbx_err e = {0};
    probe->scan = NULL;
    probe->gen_before = probe->sb->ws_generation;
    if (!err && scan_take(probe, ok, &probe->before, &probe->gen_before) < 0) {
        sbx_err_set(&e, EPROTO, "internal", "the file helper's scan is malformed");
        err = &e;
    }
    if (err && !strcmp(err->code, "sandbox_not_running")) {
        probe->ready(err, probe->data);
        return;
    }
    if (err)
        probe_warn(probe, "the workspace could not be walked before the command", err);
    probe->ready(NULL, probe->data);
}

int receipt_probe_start(struct sandbox *sb, const char *command, const char *language,
                        receipt_ready_fn ready, void *data, struct receipt_probe **out,
                        struct sbx_err *err)
{
    struct receipt_probe *probe = probe_alloc(command, language);
    probe->sb = sb;
    probe->ready = ready;
    probe->data = data;
    int r = agentfs_start(sb, NULL, scan_req(), before_done, probe, &probe->scan, err);
    if (r < 0) {
        receipt_probe_free(probe);
        return r;
    }
    *out = probe;
    return 0;
}

static void build_finish(struct receipt_probe *probe)
{
    json_t *outputs = probe->outputs;
    probe->outputs = NULL;
    json_t *r = receipt_doc(probe, probe->sb, probe->exec_id, outputs,
                            json_incref(probe->warnings), probe->gen_after);
    probe->built(r, probe->data);
}

static int rd_file(json_t *head, const char *path, void *data, struct sbx_err *err)
{
    struct receipt_probe *probe = data;
    free(probe->cur);
    probe->cur = sbx_xstrdup(path);
    probe->cur_size = 0;
    if (EVP_DigestInit_ex(probe->md, EVP_sha256(), NULL) != 1)
        return sbx_err_set(err, EIO, "internal", "SHA-256 is not available");
    return 0;
}

static int rd_bytes(const uint8_t *buf, size_t len, void *data, struct sbx_err *err)
{
    struct receipt_probe *probe = data;
    probe->cur_size += len;
    if (EVP_DigestUpdate(probe->md, buf, len) != 1)
        return sbx_err_set(err, EIO, "internal", "SHA-256 failed");
    return 0;
}

static int rd_end(void *data, struct sbx_err *err)
{
    struct receipt_probe *probe = data;
    char sha[WS_SHA256_HEX_LEN + 1];
    if (ws_sha256_final(probe->md, sha, err) < 0)
        return sbx_err_ret(err);
    json_array_append_new(probe->outputs, output_json(probe->cur, sha, probe->cur_size));
    json_array_append_new(probe->sent, export_name_json(probe->cur));
    return 0;
}

static const struct export_reader_ops rd_reader = {
    .on_file = rd_file, .on_bytes = rd_bytes, .on_end = rd_end};

static void rd_data(const uint8_t *buf, size_t len, void *data)
{
    struct receipt_probe *probe = data;
    /* After the first failure the rest is taken and dropped; rd_done says it. */
    if (!probe->rd_err.code[0])
        (void)export_reader_feed(&probe->reader, buf, len, &probe->rd_err);
    agentfs_stream_credit(probe->rd, len);
}

static void rd_done(const struct sbx_err *err, void *data)
{
    struct receipt_probe *probe = data;
    probe->rd = NULL;
    if (!err && !probe->rd_err.code[0] && !export_reader_complete(&probe->reader))
        sbx_err_set(&probe->rd_err, EPROTO, "internal", "the file helper's export ended midway");
    if (!err && probe->rd_err.code[0])
        err = &probe->rd_err;
    if (err)
        probe_warn(probe, "the outputs could not be read back", err);
    /* A changed file the helper did not send (gone, no longer a regular file, or past
     * RECEIPT_AGENT_BYTES_MAX) is said, never listed with a hash. */
    size_t i, j;
    json_t *p, *o;
    json_array_foreach(probe->changed, i, p)
    {
        bool sent = false;
        json_array_foreach(probe->sent, j, o)
            sent = sent || json_equal(o, p);
        if (sent || err)
            continue;
        _cleanup_free_ char *raw = export_name_of(p);
        _cleanup_free_ char *shown = sbx_utf8_lossy(raw ? raw : "", raw ? strlen(raw) : 0);
        json_array_append_new(probe->warnings,
                              json_sprintf("%s: changed, but not read back (removed "
                                           "meanwhile, or past %llu bytes of outputs)",
                                           shown, (unsigned long long)RECEIPT_AGENT_BYTES_MAX));
    }
    build_finish(probe);
}

static const struct agentfs_stream_ops rd_ops = {.on_data = rd_data, .on_done = rd_done};

static void after_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                       void *data)
{
    struct receipt_probe *probe = data;
    struct sbx_err e = {0};
    struct out_list now = {0};
    probe->scan = NULL;
    probe->gen_after = probe->sb->ws_generation;
    if (!err && scan_take(probe, ok, &now, &probe->gen_after) < 0) {
        sbx_err_set(&e, EPROTO, "internal", "the file helper's scan is malformed");
        err = &e;
    }
    if (err) {
        probe_warn(probe, "the workspace could not be walked after the command", err);
        out_list_clear(&now);
        build_finish(probe);
        return;
    }
    probe->changed = json_array();
    probe->sent = json_array();
    for (size_t i = 0; i < now.n; i++) {
        const struct out_entry *n = &now.v[i], *was = find_out(&probe->before, n->path);
        if (was && was->size == n->size && was->mtime_ns == n->mtime_ns &&
            was->ctime_ns == n->ctime_ns && was->ino == n->ino)
            continue;
        if (json_array_size(probe->changed) >= RECEIPT_MAX_OUTPUTS) {
            json_array_append_new(probe->warnings,
                                  json_string("more outputs than a receipt lists"));
            break;
        }
        json_array_append_new(probe->changed, export_name_json(n->path));
    }
    out_list_clear(&now);
    if (json_array_size(probe->changed) == 0) {
        build_finish(probe);
        return;
    }
    probe->md = EVP_MD_CTX_new();
    if (!probe->md)
        abort();
    export_reader_init(&probe->reader, &rd_reader, probe);
    json_t *req = json_pack("{s:s,s:s,s:s,s:i,s:I,s:O}", "op", "export", "root", AGENTWS_ROOT,
                            "path", SANDBOX_OUT_DIR, "max", RECEIPT_MAX_OUTPUTS, "bytes",
                            (json_int_t)RECEIPT_AGENT_BYTES_MAX, "paths", probe->changed);
    if (agentfs_stream_start(probe->sb, req, false, &rd_ops, probe, &probe->rd, &e) < 0) {
        probe_warn(probe, "the outputs could not be read back", &e);
        build_finish(probe);
    }
}

void receipt_build_start(struct receipt_probe *probe, const char *exec_id,
                         receipt_built_fn built, void *data)
{
    struct sbx_err err = {0};
    probe->built = built;
    probe->data = data;
    snprintf(probe->exec_id, sizeof(probe->exec_id), "%s", exec_id);
    probe->outputs = json_array();
    if (agentfs_start(probe->sb, NULL, scan_req(), after_done, probe, &probe->scan, &err) < 0) {
        probe_warn(probe, "the workspace could not be walked after the command", &err);
        probe->gen_after = probe->sb->ws_generation;
        build_finish(probe);
    }
}
