#include "receipt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "exec.h"
#include "manager.h"
#include "store/store.h"

/* --- walking the workspace without following links ------------------------------- */

typedef void (*walk_fn)(int dirfd, const char *name, const char *rel, const struct stat *st,
                        void *data);

struct walk {
    walk_fn fn;
    void *data;
    size_t entries;
    bool truncated;
};

/* Every directory is opened relative to its parent's fd with O_NOFOLLOW, so a sandbox
 * swapping a directory for a symlink mid-walk can never lead us outside. */
static void walk_dir(struct walk *w, int dirfd, const char *rel, int depth)
{
    if (depth > WS_WALK_MAX_DEPTH) {
        w->truncated = true;
        return;
    }
    int fd = dup(dirfd);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (++w->entries > WS_WALK_MAX_ENTRIES) {
            w->truncated = true;
            break;
        }
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        _cleanup_free_ char *path =
            rel[0] ? sbx_xasprintf("%s/%s", rel, de->d_name) : sbx_xstrdup(de->d_name);
        w->fn(dirfd, de->d_name, path, &st, w->data);
        if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub =
                openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(w, sub, path, depth + 1);
        }
    }
    closedir(d);
}

/* Walk the tree under root/sub (sub "" for root itself). Returns false when truncated. */
static bool walk(const char *root, const char *sub, walk_fn fn, void *data)
{
    struct walk w = {.fn = fn, .data = data};
    _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return true;
    _cleanup_close_ int fd =
        sub[0] ? openat(rfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(rfd);
    if (fd < 0)
        return true;
    walk_dir(&w, fd, sub, 0);
    return !w.truncated;
}

int receipt_hash_file(int dirfd, const char *name, char out[65], long long *size,
                      struct sbx_err *err)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening %s", name);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return sbx_err_set(err, EINVAL, "internal", "%s is not a regular file", name);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    unsigned char buf[64 * 1024];
    long long total = 0;
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = sbx_err_sys(err, errno, "reading %s", name);
            break;
        }
        if (n == 0)
            break;
        EVP_DigestUpdate(md, buf, (size_t)n);
        total += n;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_DigestFinal_ex(md, d, &dlen);
    EVP_MD_CTX_free(md);
    if (r < 0)
        return r;
    sbx_hex(d, dlen, out);
    *size = total;
    return 0;
}

/* --- the generation counter -------------------------------------------------------- */

static void fingerprint_entry(int dirfd, const char *name, const char *rel, const struct stat *st,
                              void *data)
{
    char line[128];
    int n = snprintf(line, sizeof(line), "|%o|%lld|%lld.%09ld|", (unsigned)st->st_mode,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    EVP_DigestUpdate(data, rel, strlen(rel) + 1);
    EVP_DigestUpdate(data, line, (size_t)n);
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

static void note_out(int dirfd, const char *name, const char *rel, const struct stat *st,
                     void *data)
{
    struct out_list *l = data;
    if (!S_ISREG(st->st_mode))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = sbx_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (struct out_entry){
        .path = sbx_xstrdup(rel),
        .size = st->st_size,
        .mtime_ns = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
        .ctime_ns = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
        .ino = st->st_ino,
    };
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

int receipt_probe_new(struct sandbox *sb, const struct exec_params *p, struct receipt_probe **out,
                      struct sbx_err *err)
{
    struct receipt_probe *probe = sbx_xcalloc(1, sizeof(*probe));
    probe->warnings = json_array();
    probe->gen_before = receipt_sync_generation(sb);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    const char *cmd = p->command ? p->command : "";
    if (EVP_Digest(cmd, strlen(cmd), d, &dlen, EVP_sha256(), NULL) != 1)
        abort();
    sbx_hex(d, dlen, probe->command_sha256);
    probe->language = sbx_xstrdup(p->language ? p->language : "shell");
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

static void add_output(int dirfd, const char *name, const char *rel, const struct stat *st,
                       void *data)
{
    struct build *b = data;
    if (!S_ISREG(st->st_mode))
        return;
    const struct out_entry *was = find_out(b->before, rel);
    long long mt = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    long long ct = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    if (was && was->size == st->st_size && was->mtime_ns == mt && was->ctime_ns == ct &&
        was->ino == st->st_ino)
        return;
    if (json_array_size(b->outputs) >= RECEIPT_MAX_OUTPUTS) {
        if (json_array_size(b->warnings) == 0)
            json_array_append_new(b->warnings, json_string("more outputs than a receipt lists"));
        return;
    }
    char sha[65];
    long long size;
    struct sbx_err err = {0};
    if (receipt_hash_file(dirfd, name, sha, &size, &err) < 0) {
        json_array_append_new(b->warnings, json_sprintf("%s: %s", rel, err.msg));
        return;
    }
    json_array_append_new(b->outputs, json_pack("{s:s,s:s,s:I}", "path", rel, "sha256",
                                                sha, "size", (json_int_t)size));
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
