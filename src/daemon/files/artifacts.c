#include "artifacts.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <magic.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../auth/signurl.h"
#include "../store/store.h"

#define ARTIFACTS_GC_EVERY_S 60
/* A blob stays this long past the expiry of the newest link to it. */
#define ARTIFACTS_GC_SLACK_S 60

struct artifacts {
    int store; /* <data>/artifacts */
    long long ttl;
    char *public_url;
    struct signurl_key key;
    struct scanner *scanner;
    magic_t magic;
    pthread_mutex_t magic_mu;
    /* Installing a blob (and refreshing its time) against the sweep deleting it. */
    pthread_mutex_t store_mu;
    long long last_gc;
};

static void gc(struct artifacts *a, long long now);

int artifacts_new(const struct sbxd_config *cfg, struct artifacts **out, struct sbx_err *err)
{
    _cleanup_free_ char *dir = sbx_xasprintf("%s/artifacts", cfg->data_dir);
    _cleanup_free_ char *keyp = sbx_xasprintf("%s/artifact-link.key", cfg->data_dir);
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    struct artifacts *a = sbx_xcalloc(1, sizeof(*a));
    a->store = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->store < 0) {
        free(a);
        return sbx_err_sys(err, errno, "opening %s", dir);
    }
    if ((r = signurl_key_load(keyp, &a->key, err)) < 0) {
        close(a->store);
        free(a);
        return r;
    }
    a->magic = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR);
    if (!a->magic || magic_load(a->magic, NULL) != 0) {
        r = sbx_err_set(err, EIO, "internal", "loading libmagic's database: %s",
                        a->magic ? magic_error(a->magic) : "magic_open failed");
        if (a->magic)
            magic_close(a->magic);
        close(a->store);
        free(a);
        return r;
    }
    a->ttl = cfg->artifact_url_ttl;
    a->public_url = sbx_xstrdup(cfg->public_url);
    a->scanner = scanner_new(cfg->clamav_db, cfg->signatures);
    pthread_mutex_init(&a->magic_mu, NULL);
    pthread_mutex_init(&a->store_mu, NULL);
    gc(a, sbx_wall_ms() / 1000);
    *out = a;
    return 0;
}

void artifacts_free(struct artifacts *a)
{
    if (!a)
        return;
    scanner_free(a->scanner);
    magic_close(a->magic);
    pthread_mutex_destroy(&a->magic_mu);
    pthread_mutex_destroy(&a->store_mu);
    free(a->public_url);
    close(a->store);
    free(a);
}

void artifact_list_clear(struct artifact_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* --- the store ------------------------------------------------------------------------ */

static bool is_hex64(const char *s)
{
    if (!s || strlen(s) != WS_SHA256_HEX_LEN)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* Sandbox ids name directories of the store; only our own shape is accepted. */
static bool is_sandbox_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return false;
    return true;
}

/* Remove blobs no valid link can name any more, and emptied sandbox dirs. */
static void gc(struct artifacts *a, long long now)
{
    pthread_mutex_lock(&a->store_mu);
    a->last_gc = now;
    int fd = openat(a->store, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&a->store_mu);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_sandbox_id(de->d_name))
            continue;
        int sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *sd = sfd >= 0 ? fdopendir(sfd) : NULL;
        if (!sd) {
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        struct dirent *be;
        size_t left = 0;
        while ((be = readdir(sd))) {
            if (!is_hex64(be->d_name))
                continue;
            struct stat st;
            if (fstatat(dirfd(sd), be->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                st.st_mtim.tv_sec + a->ttl + ARTIFACTS_GC_SLACK_S < now)
                (void)unlinkat(dirfd(sd), be->d_name, 0);
            else
                left++;
        }
        closedir(sd);
        if (!left)
            (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
    pthread_mutex_unlock(&a->store_mu);
}

/* Copy fd into the store while hashing it; *blob is the stored copy, read-only. */
static int store_blob(struct artifacts *a, int sbdir, int fd, char sha[WS_SHA256_HEX_LEN + 1],
                      uint64_t *size, int *blob, struct sbx_err *err)
{
    _cleanup_close_ int tmp = openat(sbdir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tmp < 0)
        return sbx_err_sys(err, errno, "creating a blob");
    int r = ws_sha256_fd(fd, tmp, sha, size, err);
    if (r < 0)
        return r;
    pthread_mutex_lock(&a->store_mu);
    if (linkat(tmp, "", sbdir, sha, AT_EMPTY_PATH) == 0) {
        *blob = TAKE_FD(tmp);
    } else if (errno == EEXIST) {
        /* The same bytes are stored already: keep that copy alive for the new link. */
        *blob = openat(sbdir, sha, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (*blob >= 0)
            (void)futimens(*blob, NULL);
        else
            r = sbx_err_sys(err, errno, "opening a blob");
    } else {
        r = sbx_err_sys(err, errno, "storing a blob");
    }
    pthread_mutex_unlock(&a->store_mu);
    return r;
}

/* --- collection --------------------------------------------------------------------------- */

struct collect {
    struct artifacts *a;
    struct artifact_list *out;
    int sbdir;
};

static void detect_mime(struct artifacts *a, int fd, char *out)
{
    pthread_mutex_lock(&a->magic_mu);
    const char *m = lseek(fd, 0, SEEK_SET) == 0 ? magic_descriptor(a->magic, fd) : NULL;
    snprintf(out, ARTIFACT_MIME_MAX, "%s", m ? m : "application/octet-stream");
    pthread_mutex_unlock(&a->magic_mu);
}

static int collect_one(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct collect *c = data;
    if (e->type != WS_FILE)
        return 0;
    if (c->out->n == ARTIFACTS_MAX) {
        c->out->truncated = true;
        return 1;
    }
    _cleanup_close_ int fd =
        openat(e->dir, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return 0; /* replaced since the walk saw it */
    struct artifact art = {0};
    _cleanup_close_ int blob = -1;
    int r = store_blob(c->a, c->sbdir, fd, art.sha256, &art.size, &blob, err);
    if (r < 0)
        return r;
    detect_mime(c->a, blob, art.mime);
    art.scan = scanner_scan_fd(c->a->scanner, blob, art.scan_detail, sizeof(art.scan_detail));
    art.path = sbx_xstrdup(e->path);
    c->out->v = sbx_xrealloc(c->out->v, (c->out->n + 1) * sizeof(*c->out->v));
    c->out->v[c->out->n++] = art;
    return 0;
}

void artifacts_collect(struct artifacts *a, int root, const char *sandbox_id,
                       struct artifact_list *out)
{
    memset(out, 0, sizeof(*out));
    long long now = sbx_wall_ms() / 1000;
    if (now - a->last_gc >= ARTIFACTS_GC_EVERY_S)
        gc(a, now);
    if (!is_sandbox_id(sandbox_id)) {
        out->ret = sbx_err_set(&out->err, EINVAL, "internal", "bad sandbox id");
        return;
    }
    pthread_mutex_lock(&a->store_mu);
    if (mkdirat(a->store, sandbox_id, 0700) < 0 && errno != EEXIST) {
        out->ret = sbx_err_sys(&out->err, errno, "creating the artifact store");
        pthread_mutex_unlock(&a->store_mu);
        return;
    }
    struct collect c = {
        .a = a,
        .out = out,
        .sbdir = openat(a->store, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    pthread_mutex_unlock(&a->store_mu);
    if (c.sbdir < 0) {
        out->ret = sbx_err_sys(&out->err, errno, "opening the artifact store");
        return;
    }
    struct sbx_err lerr = {0};
    bool trunc = false;
    int r = ws_walk(root, ARTIFACTS_DIR, true, SIZE_MAX, collect_one, &c, &trunc, &lerr);
    close(c.sbdir);
    out->truncated = out->truncated || trunc;
    /* No out/ (or not a directory) is simply no artifacts. */
    if (r < 0 && strcmp(lerr.code, "file_not_found") && strcmp(lerr.code, "invalid_path")) {
        out->ret = r;
        out->err = lerr;
    }
}

/* --- links ------------------------------------------------------------------------------- */

char *artifacts_escape_path(const char *path)
{
    /* Each segment escaped on its own: the slashes stay path separators. */
    size_t cap = strlen(path) * 3 + 1, at = 0;
    char *enc = sbx_xmalloc(cap);
    const char *c = path;
    for (;;) {
        const char *e = strchrnul(c, '/');
        char *seg = curl_easy_escape(NULL, c, (int)(e - c));
        if (!seg)
            abort();
        at += (size_t)snprintf(enc + at, cap - at, "%s%s", seg, *e ? "/" : "");
        curl_free(seg);
        if (!*e)
            break;
        c = e + 1;
    }
    return enc;
}

static char *link_url(struct artifacts *a, const char *sandbox_id, const char *path,
                      const char *sha, long long expires, const char *sig)
{
    _cleanup_free_ char *enc = artifacts_escape_path(path);
    return sbx_xasprintf("%s/v1/sandboxes/%s/artifacts/%s?sha256=%s&expires=%lld&sig=%s",
                         a->public_url, sandbox_id, enc, sha, expires, sig);
}

json_t *artifacts_to_json(struct artifacts *a, const char *sandbox_id,
                          const struct artifact_list *l, long long now)
{
    json_t *arr = json_array();
    json_t *engine = scanner_describe(a->scanner);
    long long expires = now + a->ttl;
    for (size_t i = 0; i < l->n; i++) {
        const struct artifact *x = &l->v[i];
        json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:s,s:O}", "path", x->path, "size",
                              (json_int_t)x->size, "mime", x->mime, "sha256", x->sha256, "scan",
                              scan_verdict_name(x->scan), "scan_engine", engine);
        if (x->scan == SCAN_INFECTED)
            json_object_set_new(o, "virus", json_string(x->scan_detail));
        else if (x->scan == SCAN_ERROR)
            json_object_set_new(o, "scan_error", json_string(x->scan_detail));
        else {
            char sig[SIGNURL_SIG_HEX_LEN + 1];
            signurl_sign(&a->key, sandbox_id, x->path, x->sha256, expires, sig);
            _cleanup_free_ char *url = link_url(a, sandbox_id, x->path, x->sha256, expires, sig);
            json_object_set_new(o, "url", json_string(url));
            json_object_set_new(o, "expires_at", json_integer(expires));
        }
        json_array_append_new(arr, o);
    }
    json_decref(engine);
    return arr;
}

int artifacts_open_link(struct artifacts *a, const char *sandbox_id, const char *path,
                        const char *sha256, const char *expires, const char *sig, long long now,
                        int *fd, uint64_t *size, struct sbx_err *err)
{
    char *end = NULL;
    errno = 0;
    long long exp = expires && *expires ? strtoll(expires, &end, 10) : 0;
    if (!is_sandbox_id(sandbox_id) || !is_hex64(sha256) || !end || *end || errno ||
        !signurl_verify(&a->key, sandbox_id, path, sha256, exp, sig))
        return sbx_err_set(err, EACCES, "invalid_signature", "the link's signature is not valid");
    if (exp < now)
        return sbx_err_set(err, EACCES, "link_expired", "the link expired at %lld", exp);
    _cleanup_free_ char *rel = sbx_xasprintf("%s/%s", sandbox_id, sha256);
    _cleanup_close_ int b = openat(a->store, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (b < 0 || fstat(b, &st) < 0)
        return sbx_err_set(err, ENOENT, "artifact_not_found", "the artifact is gone");
    *size = (uint64_t)st.st_size;
    *fd = TAKE_FD(b);
    return 0;
}

struct collect_job {
    struct artifacts *a;
    int root;
    char sandbox_id[STORE_ID_MAX + 1];
    struct artifact_list list;
    artifacts_ready_fn cb;
    void *data;
};

static void collect_run(void *data)
{
    struct collect_job *j = data;
    artifacts_collect(j->a, j->root, j->sandbox_id, &j->list);
}

static void collect_done(void *data, bool ran)
{
    struct collect_job *j = data;
    struct sbx_err err = {0};
    if (!ran)
        sbx_err_set(&err, ESHUTDOWN, "shutting_down", "sbxd is stopping");
    else if (j->list.ret < 0)
        err = j->list.err;
    if (ran && j->list.ret == 0)
        j->cb(artifacts_to_json(j->a, j->sandbox_id, &j->list, sbx_wall_ms() / 1000), NULL,
              j->data);
    else
        j->cb(NULL, &err, j->data);
    artifact_list_clear(&j->list);
    close(j->root);
    free(j);
}

void artifacts_collect_async(struct artifacts *a, struct jobs *jobs, const char *workspace,
                             const char *sandbox_id, artifacts_ready_fn cb, void *data)
{
    struct sbx_err err = {0};
    int root;
    if (ws_open_root(workspace, &root, &err) < 0) {
        cb(NULL, &err, data);
        return;
    }
    struct collect_job *j = sbx_xcalloc(1, sizeof(*j));
    j->a = a;
    j->root = root;
    snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s", sandbox_id);
    j->cb = cb;
    j->data = data;
    jobs_submit(jobs, collect_run, collect_done, j);
}
