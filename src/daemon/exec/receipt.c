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
#include "../files/agentws.h"
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

long long receipt_sync_generation(struct sandbox *sb)
{
    struct store *st = manager_store(sb->mgr);
    struct sbx_err err = {0};
    if (!sb->ws_fingerprint[0] && sb->ws_generation == 0 &&
        store_ws_get(st, sb->rec.id, &sb->ws_generation, sb->ws_fingerprint, &err) < 0)
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
    char now[65];
    fingerprint(sb->workspace, now);
    if (strcmp(now, sb->ws_fingerprint)) {
        sb->ws_generation++;
        memcpy(sb->ws_fingerprint, now, sizeof(now));
        if (store_ws_set(st, sb->rec.id, sb->ws_generation, now, &err) < 0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
    }
    return sb->ws_generation;
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

int receipt_probe_new(struct sandbox *sb, const char *command, const char *language,
                      struct receipt_probe **out,
                      struct sbx_err *err)
{
    struct receipt_probe *probe = sbx_xcalloc(1, sizeof(*probe));
    probe->warnings = json_array();
    probe->gen_before = receipt_sync_generation(sb);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    const char *cmd = command ? command : "";
    if (EVP_Digest(cmd, strlen(cmd), d, &dlen, EVP_sha256(), NULL) != 1)
        abort();
    sbx_hex(d, dlen, probe->command_sha256);
    probe->language = sbx_xstrdup(language ? language : "shell");
    /* The walks below read the host's workspace directory, which is not this sandbox's
     * /workspace: say so rather than list nothing as if nothing changed. */
    if (sandbox_workspace_remote(sb))
        json_array_append_new(probe->warnings,
                              json_string("the workspace is not on this host (a provider's "
                                          "sandbox): outputs and the workspace generation are "
                                          "not tracked; GET .../artifacts lists out/"));
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
    out_list_clear(&probe->before);
    free(probe->language);
    json_decref(probe->warnings);
    free(probe);
}

struct build {
    const struct out_list *before;
    json_t *outputs;
    json_t *warnings;
};

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
    json_array_append_new(b->outputs, json_pack("{s:s,s:s,s:I}", "path", rel, "sha256",
                                                sha, "size", (json_int_t)size));
    return 0;
}

json_t *receipt_build(struct receipt_probe *probe, struct sandbox *sb, const char *exec_id)
{
    struct build b = {.before = &probe->before, .outputs = json_array(),
                      .warnings = json_copy(probe->warnings)};
    (void)walk(sb->workspace, "out", add_output, &b);
    long long gen_after = receipt_sync_generation(sb);
    json_t *r = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:[],s:o,s:I,s:I}", "exec_id", exec_id,
                          "sandbox_id", sb->rec.id, "template", sb->rec.template_name,
                          "image_digest", sb->rec.template_digest, "language", probe->language,
                          "command_sha256", probe->command_sha256, "inputs", "outputs",
                          b.outputs, "workspace_generation_before",
                          (json_int_t)probe->gen_before, "workspace_generation_after",
                          (json_int_t)gen_after);
    if (json_array_size(b.warnings))
        json_object_set(r, "warnings", b.warnings);
    json_decref(b.warnings);
    return r;
}
