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
#include "artcache.h"
#include "listing.h"

#define ARTIFACTS_GC_EVERY_S 60
/* Files are copied, typed and scanned by up to this many threads per collection (one per
 * core), fed through a queue of this many open files. */
#define ARTIFACTS_WORKERS_MAX 8
#define ARTIFACTS_QUEUE_MAX 64
/* Files up to this size are read once into their worker's buffer and hashed, stored,
 * typed and scanned from it: the blob is not read again, and neither libmagic's buffer
 * per call (bytes_max, 7 MiB) nor libclamav's anonymous map of the file is made, whose
 * unmapping flushes the TLB of every core that ran a worker. */
#define ARTIFACTS_INLINE_MAX (256u * 1024u)
/* libmagic handles are not thread-safe: each worker takes its own, kept for reuse. */
#define ARTIFACTS_MAGIC_SPARE (2 * ARTIFACTS_WORKERS_MAX)
/* A blob stays this long past the expiry of the newest link to it. */
#define ARTIFACTS_GC_SLACK_S 60

struct artifacts {
    int store; /* <data>/artifacts */
    long long ttl;
    char *public_url;
    struct signurl_key key;
    struct scanner *scanner;
    struct art_cache *cache;
    unsigned workers;
    magic_t magic[ARTIFACTS_MAGIC_SPARE];
    size_t n_magic;
    pthread_mutex_t magic_mu;
    /* Installing a blob (and refreshing its time) against the sweep deleting it. */
    pthread_mutex_t store_mu;
    long long last_gc;
};

static void gc(struct artifacts *a, long long now);

/* At start nothing collects yet: every staging directory is a leftover. */
static void sweep_stages(struct artifacts *a)
{
    int fd = openat(a->store, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        struct sbx_err err = {0};
        if (!strncmp(de->d_name, ARTIFACTS_STAGE_PREFIX, sizeof(ARTIFACTS_STAGE_PREFIX) - 1))
            (void)ws_remove(a->store, de->d_name, &err); /* tried again at the next start */
    }
    closedir(d);
}

static magic_t magic_new(struct sbx_err *err)
{
    magic_t m = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR);
    if (!m || magic_load(m, NULL) != 0) {
        sbx_err_set(err, EIO, "internal", "loading libmagic's database: %s",
                    m ? magic_error(m) : "magic_open failed");
        if (m)
            magic_close(m);
        return NULL;
    }
    return m;
}

int artifacts_new(const struct sbxd_config *cfg, struct artifacts **out, struct sbx_err *err)
{
    _cleanup_free_ char *dir = sbx_xasprintf("%s/artifacts", cfg->data_dir);
    _cleanup_free_ char *keyp = sbx_xasprintf("%s/artifact-link.key", cfg->data_dir);
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    /* A hint only: each sandbox's blobs then get inodes in a block group of their own,
     * away from the churn of the rest of the data dir (where ext4 without a journal scans
     * past every inode freed in the last seconds before it reuses one). */
    (void)sbx_mark_topdir(dir);
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
    a->magic[0] = magic_new(err);
    if (!a->magic[0]) {
        close(a->store);
        free(a);
        return -EIO;
    }
    a->n_magic = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    a->workers = cpus < 1                       ? 1
                 : cpus > ARTIFACTS_WORKERS_MAX ? ARTIFACTS_WORKERS_MAX
                                                : (unsigned)cpus;
    a->cache = art_cache_new();
    a->ttl = cfg->artifact_url_ttl;
    a->public_url = sbx_xstrdup(cfg->public_url);
    a->scanner = scanner_new(cfg->clamav_db, cfg->signatures);
    pthread_mutex_init(&a->magic_mu, NULL);
    pthread_mutex_init(&a->store_mu, NULL);
    sweep_stages(a);
    gc(a, sbx_wall_ms() / 1000);
    *out = a;
    return 0;
}

void artifacts_free(struct artifacts *a)
{
    if (!a)
        return;
    scanner_free(a->scanner);
    art_cache_free(a->cache);
    for (size_t i = 0; i < a->n_magic; i++)
        magic_close(a->magic[i]);
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

/* Link the unnamed copy tmp into the store as sha; *blob is the stored copy, read-only. */
static int install_blob(struct artifacts *a, int sbdir, int *tmp, const char *sha, int *blob,
                        struct sbx_err *err)
{
    int r = 0;
    pthread_mutex_lock(&a->store_mu);
    if (linkat(*tmp, "", sbdir, sha, AT_EMPTY_PATH) == 0) {
        *blob = TAKE_FD(*tmp);
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

/* Copy fd into the store while hashing it. */
static int store_blob(struct artifacts *a, int sbdir, int fd, char sha[WS_SHA256_HEX_LEN + 1],
                      uint64_t *size, int *blob, struct sbx_err *err)
{
    _cleanup_close_ int tmp = openat(sbdir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tmp < 0)
        return sbx_err_sys(err, errno, "creating a blob");
    int r = ws_sha256_fd(fd, tmp, sha, size, err);
    return r < 0 ? r : install_blob(a, sbdir, &tmp, sha, blob, err);
}

/* Store len bytes already hashed as sha. */
static int store_bytes(struct artifacts *a, int sbdir, const void *buf, size_t len, const char *sha,
                       int *blob, struct sbx_err *err)
{
    _cleanup_close_ int tmp = openat(sbdir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tmp < 0)
        return sbx_err_sys(err, errno, "creating a blob");
    int r = sbx_write_all(tmp, buf, len);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing a blob");
    return install_blob(a, sbdir, &tmp, sha, blob, err);
}

/* --- collection --------------------------------------------------------------------------- */

/* One file of out/, in walk order. */
struct item {
    struct artifact art;
    struct art_stamp stamp;
    bool settled;
    const struct art_cached *prior; /* the last collection's entry for the path */
    int fd;                         /* until a worker is done with it */
};

/* A worker thread's own: its libmagic handle, taken on first need, and its buffer. */
struct worker {
    magic_t magic;
    unsigned char *buf; /* ARTIFACTS_INLINE_MAX + 1 */
};

struct collect {
    struct artifacts *a;
    int sbdir;
    struct art_set *old;
    struct item **items;
    size_t n, cap;
    bool truncated;
    /* The workers' queue and the first error any of them met. */
    pthread_mutex_t mu;
    pthread_cond_t more, room;
    struct item *queue[ARTIFACTS_QUEUE_MAX];
    size_t q_head, q_len;
    bool closing;
    int ret;
    struct sbx_err err;
    pthread_t threads[ARTIFACTS_WORKERS_MAX];
    unsigned n_threads;
};

static magic_t magic_take(struct artifacts *a)
{
    pthread_mutex_lock(&a->magic_mu);
    magic_t m = a->n_magic ? a->magic[--a->n_magic] : NULL;
    pthread_mutex_unlock(&a->magic_mu);
    struct sbx_err err = {0};
    return m ? m : magic_new(&err);
}

static void magic_give(struct artifacts *a, magic_t m)
{
    if (!m)
        return;
    pthread_mutex_lock(&a->magic_mu);
    if (a->n_magic < ARTIFACTS_MAGIC_SPARE)
        a->magic[a->n_magic++] = TAKE_PTR(m);
    pthread_mutex_unlock(&a->magic_mu);
    if (m)
        magic_close(m);
}

static void set_mime(const char *t, char *out)
{
    snprintf(out, ARTIFACT_MIME_MAX, "%s", t ? t : "application/octet-stream");
}

static void detect_mime(magic_t m, int fd, char *out)
{
    set_mime(m && lseek(fd, 0, SEEK_SET) == 0 ? magic_descriptor(m, fd) : NULL, out);
}

/* Typing a file held whole from its bytes gives what the descriptor would, but for an ELF
 * image: libmagic tells a PIE executable from a shared library only through a descriptor. */
static void detect_mime_bytes(magic_t m, const unsigned char *buf, size_t len, int fd, char *out)
{
    static const unsigned char elf[] = {0x7f, 'E', 'L', 'F'};
    if (len >= sizeof(elf) && !memcmp(buf, elf, sizeof(elf)))
        detect_mime(m, fd, out);
    else
        set_mime(m ? magic_buffer(m, buf, len) : NULL, out);
}

/* The stored blob of sha still exists, and now stays for a new link's lifetime. */
static bool blob_keep(struct artifacts *a, int sbdir, const char *sha)
{
    pthread_mutex_lock(&a->store_mu);
    bool ok = utimensat(sbdir, sha, NULL, AT_SYMLINK_NOFOLLOW) == 0;
    pthread_mutex_unlock(&a->store_mu);
    return ok;
}

static void reuse(struct item *it, const struct art_cached *c)
{
    memcpy(it->art.sha256, c->art.sha256, sizeof(it->art.sha256));
    memcpy(it->art.mime, c->art.mime, sizeof(it->art.mime));
    memcpy(it->art.scan_detail, c->art.scan_detail, sizeof(it->art.scan_detail));
    it->art.size = c->art.size;
    it->art.scan = c->art.scan;
}

/* The state of it->fd now, against the one before its read: settled or not (artcache.h). */
static bool settled_since(struct item *it, const struct art_settle *t)
{
    struct art_stamp after;
    return art_stamp_fd(it->fd, &after) == 0 && art_settled_end(t, &it->stamp, &after);
}

/* A file read whole into buf: hashed, stored, typed and scanned from there. */
static int process_bytes(struct collect *c, struct item *it, struct worker *w, size_t len,
                         const struct art_settle *t, struct sbx_err *err)
{
    ws_sha256_buf(w->buf, len, it->art.sha256);
    it->art.size = len;
    if (it->prior && !strcmp(it->art.sha256, it->prior->art.sha256) && len == it->prior->art.size &&
        blob_keep(c->a, c->sbdir, it->art.sha256)) {
        reuse(it, it->prior);
        it->settled = settled_since(it, t);
        return 0;
    }
    _cleanup_close_ int blob = -1;
    int r = store_bytes(c->a, c->sbdir, w->buf, len, it->art.sha256, &blob, err);
    if (r < 0)
        return r;
    it->settled = settled_since(it, t);
    if (!w->magic)
        w->magic = magic_take(c->a);
    detect_mime_bytes(w->magic, w->buf, len, blob, it->art.mime);
    it->art.scan = scanner_scan_mem(c->a->scanner, w->buf, len, it->art.scan_detail,
                                    sizeof(it->art.scan_detail));
    return 0;
}

/* A file larger than the worker's buffer: copied into the store while hashed, typed and
 * scanned from the stored copy. */
static int process_file(struct collect *c, struct item *it, struct worker *w,
                        const struct art_settle *t, struct sbx_err *err)
{
    int r;
    if (lseek(it->fd, 0, SEEK_SET) < 0)
        return sbx_err_sys(err, errno, "rewinding an artifact");
    if (it->prior) {
        /* Most likely the same bytes under a new stamp: a read settles it. */
        char sha[WS_SHA256_HEX_LEN + 1];
        uint64_t size;
        if ((r = ws_sha256_fd(it->fd, -1, sha, &size, err)) < 0)
            return r;
        if (!strcmp(sha, it->prior->art.sha256) && size == it->prior->art.size &&
            blob_keep(c->a, c->sbdir, sha)) {
            reuse(it, it->prior);
            it->settled = settled_since(it, t);
            return 0;
        }
        if (lseek(it->fd, 0, SEEK_SET) < 0)
            return sbx_err_sys(err, errno, "rewinding an artifact");
    }
    _cleanup_close_ int blob = -1;
    if ((r = store_blob(c->a, c->sbdir, it->fd, it->art.sha256, &it->art.size, &blob, err)) < 0)
        return r;
    it->settled = settled_since(it, t);
    if (!w->magic)
        w->magic = magic_take(c->a);
    detect_mime(w->magic, blob, it->art.mime);
    it->art.scan =
        scanner_scan_fd(c->a->scanner, blob, it->art.scan_detail, sizeof(it->art.scan_detail));
    return 0;
}

static int process(struct collect *c, struct item *it, struct worker *w, struct sbx_err *err)
{
    struct art_settle t;
    art_settled_begin(it->fd, &t);
    int r = art_stamp_fd(it->fd, &it->stamp);
    if (r < 0)
        return sbx_err_sys(err, -r, "stat of an artifact");
    size_t len = 0;
    if ((r = sbx_read_upto(it->fd, w->buf, ARTIFACTS_INLINE_MAX + 1, &len)) < 0)
        return sbx_err_sys(err, -r, "reading an artifact");
    return len <= ARTIFACTS_INLINE_MAX ? process_bytes(c, it, w, len, &t, err)
                                       : process_file(c, it, w, &t, err);
}

static void *worker(void *data)
{
    struct collect *c = data;
    struct worker w = {.buf = sbx_xmalloc(ARTIFACTS_INLINE_MAX + 1)};
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->q_len && !c->closing)
            pthread_cond_wait(&c->more, &c->mu);
        if (!c->q_len)
            break;
        struct item *it = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % ARTIFACTS_QUEUE_MAX;
        c->q_len--;
        pthread_cond_signal(&c->room);
        bool failed = c->ret < 0;
        pthread_mutex_unlock(&c->mu);
        struct sbx_err err = {0};
        int r = failed ? 0 : process(c, it, &w, &err);
        close(it->fd);
        it->fd = -1;
        pthread_mutex_lock(&c->mu);
        if (r < 0 && c->ret == 0) {
            c->ret = r;
            c->err = err;
        }
    }
    pthread_mutex_unlock(&c->mu);
    magic_give(c->a, w.magic);
    free(w.buf);
    return NULL;
}

/* Under c->mu. The first file that needs work starts the workers. */
static void start_workers(struct collect *c)
{
    while (c->n_threads < c->a->workers &&
           pthread_create(&c->threads[c->n_threads], NULL, worker, c) == 0)
        c->n_threads++;
}

static int enqueue(struct collect *c, struct item *it, struct sbx_err *err)
{
    pthread_mutex_lock(&c->mu);
    if (!c->n_threads)
        start_workers(c);
    while (c->q_len == ARTIFACTS_QUEUE_MAX && c->ret == 0)
        pthread_cond_wait(&c->room, &c->mu);
    int r = c->ret;
    if (r < 0) {
        *err = c->err;
    } else if (!c->n_threads) {
        r = sbx_err_set(err, EAGAIN, "internal", "no thread to collect artifacts with");
    } else {
        c->queue[(c->q_head + c->q_len) % ARTIFACTS_QUEUE_MAX] = it;
        c->q_len++;
        pthread_cond_signal(&c->more);
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

static int collect_one(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct collect *c = data;
    if (e->type != WS_FILE)
        return 0;
    if (c->n == ARTIFACTS_MAX) {
        c->truncated = true;
        return 1;
    }
    _cleanup_close_ int fd =
        openat(e->dir, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return 0; /* replaced since the walk saw it */
    struct item *it = sbx_xcalloc(1, sizeof(*it));
    it->fd = -1;
    it->art.path = sbx_xstrdup(e->path);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->items = sbx_xrealloc(c->items, c->cap * sizeof(*c->items));
    }
    c->items[c->n++] = it;
    it->prior = art_set_find(c->old, e->path);
    if (it->prior && it->prior->settled && art_stamp_fd(fd, &it->stamp) == 0 &&
        art_stamp_eq(&it->stamp, &it->prior->stamp) &&
        blob_keep(c->a, c->sbdir, it->prior->art.sha256)) {
        reuse(it, it->prior);
        it->settled = true;
        return 0;
    }
    it->fd = TAKE_FD(fd);
    return enqueue(c, it, err);
}

/* Wait for the workers; 0 or the first error of any of them. */
static int finish_workers(struct collect *c, struct sbx_err *err)
{
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    pthread_cond_broadcast(&c->more);
    pthread_mutex_unlock(&c->mu);
    for (unsigned i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    if (c->ret < 0)
        *err = c->err;
    return c->ret;
}

static void collect_free(struct collect *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->items[i]->fd >= 0)
            close(c->items[i]->fd);
        free(c->items[i]->art.path);
        free(c->items[i]);
    }
    free(c->items);
    art_set_free(c->old);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->more);
    pthread_cond_destroy(&c->room);
    if (c->sbdir >= 0)
        close(c->sbdir);
}

/* Hand the items over to out, in walk order, and remember them for next time. */
static void collect_publish(struct collect *c, const char *sandbox_id, struct artifact_list *out)
{
    struct art_set *next = art_set_new();
    out->v = sbx_xcalloc(c->n ? c->n : 1, sizeof(*out->v));
    for (size_t i = 0; i < c->n; i++) {
        struct item *it = c->items[i];
        /* An engine that failed may work next time. */
        if (it->art.scan != SCAN_ERROR)
            art_set_add(next, &it->art, &it->stamp, it->settled);
        out->v[out->n++] = it->art;
        it->art.path = NULL;
    }
    art_set_seal(next);
    art_cache_put(c->a->cache, sandbox_id, next);
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
        .sbdir = openat(a->store, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    pthread_mutex_unlock(&a->store_mu);
    if (c.sbdir < 0) {
        out->ret = sbx_err_sys(&out->err, errno, "opening the artifact store");
        return;
    }
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.more, NULL);
    pthread_cond_init(&c.room, NULL);
    c.old = art_cache_take(a->cache, sandbox_id);
    struct sbx_err lerr = {0}, werr = {0};
    bool trunc = false;
    int r = ws_walk(root, ARTIFACTS_DIR, true, SIZE_MAX, collect_one, &c, &trunc, &lerr);
    int wr = finish_workers(&c, &werr);
    out->truncated = trunc || c.truncated;
    if (wr < 0) {
        out->ret = wr;
        out->err = werr;
    } else if (r < 0 && strcmp(lerr.code, "file_not_found") && strcmp(lerr.code, "invalid_path")) {
        /* No out/ (or not a directory) is simply no artifacts. */
        out->ret = r;
        out->err = lerr;
    } else {
        collect_publish(&c, sandbox_id, out);
    }
    collect_free(&c);
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
        json_t *o = json_object();
        files_path_set(o, x->path);
        json_t *rest = json_pack("{s:I,s:s,s:s,s:s,s:O}", "size", (json_int_t)x->size, "mime",
                                 x->mime, "sha256", x->sha256, "scan",
                                 scan_verdict_name(x->scan), "scan_engine", engine);
        json_object_update(o, rest);
        json_decref(rest);
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
