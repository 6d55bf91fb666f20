#include "catalog.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../files/workspace.h"
#include "../sandbox/wsimage.h"
#include "bundle.h"
#include "frontmatter.h"

struct skills {
    const struct sbxd_config *cfg;
    struct store *store;
    struct jobs *jobs;
    char *dir; /* <data>/skills */
};

/* --- a bundle unpacked and checked (worker thread, then the loop) ----------------------- */

struct unpacked {
    char tmp[PATH_MAX];  /* the directory it was unpacked into */
    char root[PATH_MAX]; /* the skill within it (the bundle's single top folder, or tmp) */
    struct skill_meta meta;
    char sha256[WS_SHA256_HEX_LEN + 1];
    int ret;
    struct sbx_err err;
};

static int read_meta(const char *root, struct skill_meta *m, struct sbx_err *err)
{
    _cleanup_close_ int rfd = -1, fd = -1;
    uint64_t size = 0;
    int r = ws_open_root(root, &rfd, err);
    if (r == 0 && (r = ws_open_file(rfd, "SKILL.md", &fd, &size, err)) < 0)
        return sbx_err_set(err, EINVAL, "invalid_skill", "the bundle has no SKILL.md");
    if (r < 0)
        return r;
    if (size > SKILL_MD_MAX)
        return sbx_err_set(err, EINVAL, "invalid_skill", "SKILL.md is larger than %u bytes",
                           SKILL_MD_MAX);
    _cleanup_free_ char *text = sbx_xmalloc(size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, text + got, size - got);
        if (n <= 0)
            return sbx_err_sys(err, n < 0 ? errno : EIO, "reading SKILL.md");
        got += (size_t)n;
    }
    text[got] = '\0';
    return skill_meta_parse(text, got, m, err);
}

/* A bundle made with `zip -r x.zip myskill/` has one folder at its top: the skill is that. */
static void find_root(struct unpacked *u)
{
    snprintf(u->root, sizeof(u->root), "%s", u->tmp);
    _cleanup_free_ char *md = sbx_xasprintf("%s/SKILL.md", u->tmp);
    if (access(md, F_OK) == 0)
        return;
    DIR *d = opendir(u->tmp);
    if (!d)
        return;
    char only[256] = "";
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && ++n == 1)
            snprintf(only, sizeof(only), "%s", de->d_name);
    closedir(d);
    struct stat st;
    if (n != 1 ||
        snprintf(u->root, sizeof(u->root), "%s/%s", u->tmp, only) >= (int)sizeof(u->root) ||
        lstat(u->root, &st) < 0 || !S_ISDIR(st.st_mode))
        snprintf(u->root, sizeof(u->root), "%s", u->tmp);
}

static int unpack(struct skills *k, int fd, struct unpacked *u, struct sbx_err *err)
{
    char hex[17];
    sbx_random_id("", 8, hex, sizeof(hex));
    snprintf(u->tmp, sizeof(u->tmp), "%s/.tmp-%s", k->dir, hex);
    if (mkdir(u->tmp, 0700) < 0)
        return sbx_err_sys(err, errno, "creating %s", u->tmp);
    _cleanup_close_ int dest = -1;
    uint64_t size;
    int r = ws_open_root(u->tmp, &dest, err);
    if (r == 0)
        r = bundle_unpack(fd, dest, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) == 0)
        r = ws_sha256_fd(fd, -1, u->sha256, &size, err);
    if (r == 0) {
        find_root(u);
        r = read_meta(u->root, &u->meta, err);
    }
    return r;
}

/* --- adding an entry (on the loop) ----------------------------------------------------- */

json_t *skills_served_json(const struct store_skill_install *i)
{
    return i->served_catalog_id[0] ? json_pack("{s:s}", "version", i->served_version) : json_null();
}

static void add_installation(const struct store_skill_install *i, void *data)
{
    json_array_append_new(data,
                          json_pack("{s:s,s:s,s:s,s:b,s:s,s:s,s:o}", "sandbox_config_id",
                                    i->config_id, "skill_id", i->id, "status", i->status, "enabled",
                                    i->enabled, "version", i->version, "bundle_sha256",
                                    i->bundle_sha256, "served", skills_served_json(i)));
}

static json_t *item_json(struct skills *k, const struct store_skill *s)
{
    json_t *envs = json_loads(s->envs_json ? s->envs_json : "[]", 0, NULL);
    json_t *installs = json_array();
    (void)store_skill_install_each(k->store, NULL, s->id, add_installation, installs, NULL);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:o,s:I,s:o}", "id", s->id, "object",
                     "skill", "name", s->name, "version", s->version, "description",
                     s->description ? s->description : "", "bundle_sha256", s->bundle_sha256,
                     "source", s->source, "builtin", !strcmp(s->source, "builtin"), "envs",
                     envs ? envs : json_array(), "created_at", (json_int_t)s->created_at,
                     "installations", installs);
}

/* Record the unpacked skill and move it to <data>/skills/<id>. */
static int commit(struct skills *k, struct unpacked *u, const char *id, const char *source,
                  const char *owner, json_t **out, struct sbx_err *err)
{
    struct store_skill s = {0};
    snprintf(s.id, sizeof(s.id), "%s", id);
    snprintf(s.name, sizeof(s.name), "%s", u->meta.name);
    snprintf(s.version, sizeof(s.version), "%s", u->meta.version);
    snprintf(s.bundle_sha256, sizeof(s.bundle_sha256), "%s", u->sha256);
    snprintf(s.source, sizeof(s.source), "%s", source);
    snprintf(s.owner, sizeof(s.owner), "%s", owner);
    s.description = u->meta.description;
    s.envs_json = json_dumps(u->meta.envs, JSON_COMPACT);
    s.created_at = sbx_wall_ms() / 1000;
    _cleanup_free_ char *dst = sbx_xasprintf("%s/%s", k->dir, id);
    (void)sbx_rm_rf(dst); /* a leftover of a crash between rename and insert */
    int r = rename(u->root, dst) < 0 ? sbx_err_sys(err, errno, "storing the skill") : 0;
    if (r == 0 && (r = store_skill_insert(k->store, &s, err)) < 0)
        (void)sbx_rm_rf(dst);
    /* What it declares is what personal and workspace values may be set for
     * (PUT /v1/me/env-vars/skill, docs/configs.md). */
    size_t i;
    json_t *e;
    json_array_foreach(r == 0 ? u->meta.envs : NULL, i, e)
    {
        struct store_skill_env d = {.skill_id = id,
                                    .name = json_string_value(json_object_get(e, "name")),
                                    .description =
                                        json_string_value(json_object_get(e, "description")),
                                    .required = json_is_true(json_object_get(e, "required")),
                                    .updated_at = s.created_at};
        if ((r = store_skill_env_declare(k->store, &d, err)) < 0)
            break;
    }
    if (r == 0 && out)
        *out = item_json(k, &s);
    free(s.envs_json);
    return r;
}

struct add_job {
    struct skills *k;
    int fd;
    bool reuse; /* the same bundle already in the catalog is that entry, not skill_exists */
    char *url;  /* fetched first, when the source is the index */
    char source[SKILL_SOURCE_MAX + 1];
    char owner[AUTH_USER_MAX + 1];
    struct unpacked u;
    skills_added_fn cb;
    void *data;
};

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
    struct add_job *j = data;
    struct stat st;
    if (fstat(j->fd, &st) < 0 || (uint64_t)st.st_size + size * n > BUNDLE_UPLOAD_MAX)
        return 0; /* curl stops: too large */
    return sbx_write_all(j->fd, p, size * n) == 0 ? size * n : 0;
}

static int fetch(struct add_job *j, struct sbx_err *err)
{
    CURL *c = curl_easy_init();
    if (!c)
        abort();
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (rc == CURLE_OK)
        return 0;
    if (status == 404)
        return sbx_err_set(err, ENOENT, "skill_not_found", "the skill index has no %s", j->source);
    return sbx_err_set(err, EIO, "skill_index_unavailable", "fetching %s from the skill index: %s",
                       j->source, curl_easy_strerror(rc));
}

static void add_run(void *data)
{
    struct add_job *j = data;
    j->u.ret = j->url ? fetch(j, &j->u.err) : 0;
    if (j->u.ret == 0)
        j->u.ret = unpack(j->k, j->fd, &j->u, &j->u.err);
}

static void add_done(void *data, bool ran)
{
    struct add_job *j = data;
    struct sbx_err err = j->u.err;
    json_t *item = NULL;
    if (!ran)
        sbx_err_set(&err, ESHUTDOWN, "shutting_down", "sbxd is stopping");
    else if (j->u.ret == 0) {
        char id[STORE_SKILL_ID_MAX + 1];
        sbx_random_id("skl_", 8, id, sizeof(id));
        struct store_skill have = {0};
        char found[STORE_SKILL_ID_MAX + 1] = "";
        if (j->reuse &&
            store_skill_find(j->k->store, j->u.meta.name, j->u.meta.version, found, NULL) == 0 &&
            found[0] && store_skill_get(j->k->store, found, &have, NULL) == 0 &&
            !strcmp(have.bundle_sha256, j->u.sha256))
            item = item_json(j->k, &have);
        else if (commit(j->k, &j->u, id, j->source, j->owner, &item, &err) < 0)
            item = NULL;
        store_skill_clear(&have);
    }
    if (j->u.tmp[0])
        (void)sbx_rm_rf(j->u.tmp);
    j->cb(item, item ? NULL : &err, j->data);
    skill_meta_clear(&j->u.meta);
    close(j->fd);
    free(j->url);
    free(j);
}

static struct add_job *add_job_new(struct skills *k, int fd, const char *source, const char *owner,
                                   bool reuse, skills_added_fn cb, void *data)
{
    struct add_job *j = sbx_xcalloc(1, sizeof(*j));
    j->k = k;
    j->fd = fd;
    j->reuse = reuse;
    snprintf(j->source, sizeof(j->source), "%s", source);
    snprintf(j->owner, sizeof(j->owner), "%s", owner);
    j->cb = cb;
    j->data = data;
    return j;
}

void skills_add_bundle(struct skills *k, int fd, const char *source, const char *owner, bool reuse,
                       skills_added_fn cb, void *data)
{
    jobs_submit(k->jobs, add_run, add_done, add_job_new(k, fd, source, owner, reuse, cb, data));
}

/* "@owner/slug": both parts [a-z0-9_.-], so the URL built from them is plain. */
static bool source_ok(const char *s)
{
    const char *slash = s[0] == '@' ? strchr(s, '/') : NULL;
    if (!slash || slash == s + 1 || !slash[1] || strlen(s) > SKILL_SOURCE_MAX)
        return false;
    for (const char *c = s + 1; *c; c++)
        if (c != slash && !((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                            *c == '_' || *c == '.'))
            return false;
    return !strstr(s, "..");
}

int skills_add_source(struct skills *k, const char *source, const char *owner, bool reuse,
                      skills_added_fn cb, void *data, struct sbx_err *err)
{
    if (!source_ok(source))
        return sbx_err_set(err, EINVAL, "invalid_source",
                           "source must be \"@owner/slug\" (a-z 0-9 - _ .)");
    if (!k->cfg->skill_index_url)
        return sbx_err_set(err, ENOTSUP, "skill_index_unavailable",
                           "this daemon has no skill index (SBX_SKILL_INDEX_URL)");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof(tmpl), "%s", k->dir);
    int fd = open(tmpl, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_err_sys(err, errno, "a temporary file for the bundle");
    struct add_job *j = add_job_new(k, fd, source, owner, reuse, cb, data);
    const char *slash = strchr(source, '/');
    j->url = sbx_xasprintf("%s/%.*s/%s.zip", k->cfg->skill_index_url, (int)(slash - source - 1),
                           source + 1, slash + 1);
    jobs_submit(k->jobs, add_run, add_done, j);
    return 0;
}

/* --- shipped skills (at start) -------------------------------------------------------- */

struct digest_ctx {
    EVP_MD_CTX *md;
};

static int digest_file(const struct ws_file *f, void *data, struct sbx_err *err)
{
    struct digest_ctx *c = data;
    EVP_DigestUpdate(c->md, f->path, strlen(f->path) + 1);
    EVP_DigestUpdate(c->md, f->sha256, sizeof(f->sha256));
    return 0;
}

/* What a shipped skill is, as a digest of its files (paths and contents). */
static int tree_digest(const char *dir, char hex[WS_SHA256_HEX_LEN + 1], struct sbx_err *err)
{
    _cleanup_close_ int root = -1;
    int r = ws_open_root(dir, &root, err);
    if (r < 0)
        return r;
    struct digest_ctx c = {.md = EVP_MD_CTX_new()};
    if (!c.md || EVP_DigestInit_ex(c.md, EVP_sha256(), NULL) != 1)
        abort();
    bool truncated;
    r = ws_hash_tree(root, "", SKILL_FILES_MAX, digest_file, &c, &truncated, err);
    unsigned char md[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(c.md, md, &n);
    EVP_MD_CTX_free(c.md);
    if (r == 0)
        sbx_hex(md, n, hex);
    return r;
}

static int add_builtin(struct skills *k, const char *src, struct sbx_err *err)
{
    struct unpacked u = {0};
    int r = tree_digest(src, u.sha256, err);
    if (r == 0)
        r = read_meta(src, &u.meta, err);
    char id[STORE_SKILL_ID_MAX + 1] = "";
    if (r == 0)
        snprintf(id, sizeof(id), "skl_%s", u.meta.name);
    struct store_skill have = {0};
    if (r == 0 && store_skill_get(k->store, id, &have, NULL) == 0) {
        bool same = !strcmp(have.bundle_sha256, u.sha256);
        store_skill_clear(&have);
        if (same)
            goto out;
        /* The shipped skill changed since the catalog took it: take the new one. */
        if ((r = store_skill_delete(k->store, id, err)) < 0)
            goto out;
    }
    if (r < 0)
        goto out;
    char hex[17];
    sbx_random_id("", 8, hex, sizeof(hex));
    snprintf(u.tmp, sizeof(u.tmp), "%s/.tmp-%s", k->dir, hex);
    snprintf(u.root, sizeof(u.root), "%s", u.tmp);
    if ((r = sbx_mkdir_p(u.tmp, 0700)) < 0) {
        sbx_err_sys(err, -r, "creating %s", u.tmp);
        goto out;
    }
    if ((r = wsimage_copy_tree(src, u.tmp, err)) < 0)
        goto out;
    r = commit(k, &u, id, "builtin", "admin", NULL, err);
out:
    if (u.tmp[0])
        (void)sbx_rm_rf(u.tmp);
    skill_meta_clear(&u.meta);
    return r;
}

int skills_new(const struct sbxd_config *cfg, struct store *st, struct jobs *jobs,
               struct skills **out, struct sbx_err *err)
{
    struct skills *k = sbx_xcalloc(1, sizeof(*k));
    k->cfg = cfg;
    k->store = st;
    k->jobs = jobs;
    k->dir = sbx_xasprintf("%s/skills", cfg->data_dir);
    int r = sbx_mkdir_p(k->dir, 0700);
    if (r < 0) {
        sbx_err_sys(err, -r, "creating %s", k->dir);
        skills_free(k);
        return r;
    }
    /* Half-unpacked bundles of a daemon that stopped mid-way. */
    DIR *d = opendir(k->dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (!strncmp(de->d_name, ".tmp-", 5))
            (void)sbx_rm_rf_at(dirfd(d), de->d_name);
    if (d)
        closedir(d);
    d = cfg->skills_dir ? opendir(cfg->skills_dir) : NULL;
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *src = sbx_xasprintf("%s/%s", cfg->skills_dir, de->d_name);
        _cleanup_free_ char *md = sbx_xasprintf("%s/SKILL.md", src);
        if (access(md, F_OK) == 0 && (r = add_builtin(k, src, err)) < 0) {
            sbx_err_wrap(err, "the shipped skill %s", de->d_name);
            break;
        }
    }
    if (d)
        closedir(d);
    if (r < 0) {
        skills_free(k);
        return r;
    }
    *out = k;
    return 0;
}

void skills_free(struct skills *k)
{
    if (!k)
        return;
    free(k->dir);
    free(k);
}

struct list_ctx {
    struct skills *k;
    json_t *list;
};

static void list_one(const struct store_skill *s, void *data)
{
    struct list_ctx *c = data;
    json_array_append_new(c->list, item_json(c->k, s));
}

int skills_list(struct skills *k, json_t **out, struct sbx_err *err)
{
    json_t *list = json_array();
    struct list_ctx c = {.k = k, .list = list};
    int r = store_skill_each(k->store, list_one, &c, err);
    if (r < 0) {
        json_decref(list);
        return r;
    }
    *out = list;
    return 0;
}

int skills_get(struct skills *k, const char *id, json_t **out, struct sbx_err *err)
{
    struct store_skill s = {0};
    int r = store_skill_get(k->store, id, &s, err);
    if (r < 0)
        return r;
    *out = item_json(k, &s);
    store_skill_clear(&s);
    return 0;
}

int skills_meta(struct skills *k, const char *id, struct skill_meta *out, struct sbx_err *err)
{
    _cleanup_free_ char *dir = skills_path(k, id);
    return read_meta(dir, out, err);
}

char *skills_path(struct skills *k, const char *id)
{
    return sbx_xasprintf("%s/%s", k->dir, id);
}

static void count_install(const struct store_skill_install *i, void *data)
{
    (*(int *)data)++;
}

/* The skill's directory, once its row says it exists. */
static int open_skill(struct skills *k, const char *id, int *root, struct sbx_err *err)
{
    struct store_skill s = {0};
    int r = store_skill_get(k->store, id, &s, err);
    store_skill_clear(&s);
    if (r < 0)
        return r;
    _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", k->dir, id);
    return ws_open_root(dir, root, err);
}

static int list_file(const struct ws_file *f, void *data, struct sbx_err *err)
{
    json_array_append_new(data, json_pack("{s:s,s:I,s:s}", "path", f->path, "size",
                                          (json_int_t)f->size, "sha256", f->sha256));
    return 0;
}

int skills_files(struct skills *k, const char *id, json_t **out, struct sbx_err *err)
{
    _cleanup_close_ int root = -1;
    int r = open_skill(k, id, &root, err);
    if (r < 0)
        return r;
    json_t *list = json_array();
    bool truncated;
    if ((r = ws_hash_tree(root, "", SKILL_FILES_MAX, list_file, list, &truncated, err)) < 0) {
        json_decref(list);
        return r;
    }
    *out = list;
    return 0;
}

/* An image small enough to show inline, by its first bytes. */
static const char *image_type(const unsigned char *p, size_t n)
{
    if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        return "image/png";
    if (n >= 3 && !memcmp(p, "\xff\xd8\xff", 3))
        return "image/jpeg";
    if (n >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
        return "image/gif";
    if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        return "image/webp";
    return NULL;
}

int skills_file_content(struct skills *k, const char *id, const char *path, json_t **out,
                        struct sbx_err *err)
{
    _cleanup_close_ int root = -1, fd = -1;
    uint64_t size = 0;
    int r = ws_path_check(path, false, err);
    if (r == 0)
        r = open_skill(k, id, &root, err);
    if (r == 0)
        r = ws_open_file(root, path, &fd, &size, err);
    if (r < 0)
        return r;
    size_t want = size < SKILL_FILE_TEXT_MAX ? (size_t)size : SKILL_FILE_TEXT_MAX;
    _cleanup_free_ unsigned char *buf = sbx_xmalloc(want + 1);
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n <= 0)
            return sbx_err_sys(err, n < 0 ? errno : EIO, "reading %s", path);
        got += (size_t)n;
    }
    json_t *j =
        json_pack("{s:s,s:s,s:I}", "object", "skill_file", "path", path, "size", (json_int_t)size);
    const char *img = image_type(buf, got);
    if (got == size && !img && sbx_utf8_valid((const char *)buf, got)) {
        json_object_set_new(j, "encoding", json_string("utf-8"));
        json_object_set_new(j, "content", json_stringn((const char *)buf, got));
    } else if (img && size <= SKILL_FILE_IMAGE_MAX) {
        _cleanup_free_ char *b64 = sbx_base64_encode(buf, got);
        json_object_set_new(j, "encoding", json_string("base64"));
        json_object_set_new(j, "mime", json_string(img));
        json_object_set_new(j, "content", json_string(b64));
    } else {
        /* Binary or too large: what it is, not its bytes. */
        json_object_set_new(j, "encoding", json_null());
        json_object_set_new(j, "binary", json_true());
        if (img)
            json_object_set_new(j, "mime", json_string(img));
    }
    *out = j;
    return 0;
}

int skills_delete(struct skills *k, const char *id, struct sbx_err *err)
{
    struct store_skill s = {0};
    int r = store_skill_get(k->store, id, &s, err);
    bool builtin = r == 0 && !strcmp(s.source, "builtin");
    store_skill_clear(&s);
    if (r < 0)
        return r;
    if (builtin)
        return sbx_err_set(err, EPERM, "skill_builtin",
                           "%s ships with sbx and comes back at every start", id);
    int used = 0;
    if ((r = store_skill_install_each(k->store, NULL, id, count_install, &used, err)) < 0)
        return r;
    if (used)
        return sbx_err_set(err, EBUSY, "skill_in_use",
                           "%s is installed in %d configuration(s): delete those installs first",
                           id, used);
    if ((r = store_skill_delete(k->store, id, err)) < 0)
        return r;
    _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", k->dir, id);
    (void)sbx_rm_rf(dir);
    return 0;
}
