/* Import circle with e2b_template_tags.c (allowed inside a folder,
 * docs/architecture.md#layering): a finished build's tags are recorded there, and
 * Template.exists there asks whether a name is being built here. */
/* E2B's template builds (the SDK's Template builder, docs/e2b.md "Templates"), on sbx's
 * custom templates (templates/build.c, docs/templates.md):
 *   POST /e2b/api/v3/templates                         a build, waiting for its steps
 *   GET  /e2b/api/templates/{id}/files/{hash}          where a COPY step's files go
 *   PUT  /e2b/api/templates/{id}/builds/{b}/files/{h}  the upload itself (a tar, its token)
 *   POST /e2b/api/v2/templates/{id}/builds/{b}         the steps: the build starts
 *   GET  /e2b/api/templates/{id}/builds/{b}/status     status and log entries
 * An E2B templateID is the sbx template name (its alias): Sandbox.create(alias) finds it as
 * any other template. The steps become one sbx recipe (from, run, start_command,
 * ready_check), so the build is sbx's own: the same sandbox, limits, cache and audit.
 * Aliases, tags, GET and DELETE are in e2b_template_tags.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/template.h"
#include "../sbxd.h"
#include "../templates/build.h"
#include "../templates/recipe.h"
#include "e2b.h"
#include "e2b_templates.h"

#define E2B_BUILDS_MAX 64          /* build records kept (waiting, running or ended) */
#define E2B_STEPS_MAX 64           /* steps of one build (RUN and COPY at most RECIPE_RUN_MAX) */
#define E2B_UPLOAD_MAX (64ll << 20) /* one COPY step's archive */
#define E2B_LOGS_PAGE 100          /* log entries per status answer, as E2B's */
#define E2B_TOKEN_LEN 48

enum eb_state { EB_WAITING, EB_STARTED, EB_SUPERSEDED };

struct e2b_tbuild {
    struct e2b_templates *t;
    char id[E2B_BUILD_ID_LEN + 1]; /* a UUID, as E2B's */
    char name[TEMPLATE_NAME_MAX + 1];
    struct auth_identity who; /* who asked: the owner, and the audit's key */
    char token[E2B_TOKEN_LEN + 1]; /* the upload links' credential */
    json_t *tags;                  /* the build's tags ("default" when none was asked) */
    enum eb_state state;
    char *dir;       /* its uploads: <cache>/.e2b-uploads/<id> */
    json_t *uploads; /* {files hash: {"sha256", "size"}} */
    long long upload_bytes;
    long long created_ms, started_ms;
    json_t *step_of_run; /* E2B's step ("1", "2", ...) of each recipe run step */
    json_t *events;      /* the sbx build's events (shared with it) once started */
    char recipe_digest[65];
    struct template_build *watching; /* until the sbx build ends */
    struct e2b_tbuild *next;
};

struct e2b_templates {
    struct sbxd *d;
    struct e2b_tbuild *list; /* newest first */
};

/* --- records --------------------------------------------------------------------------- */

static char *uploads_root(const struct sbxd *d)
{
    return sbx_xasprintf("%s/.e2b-uploads", d->cfg.template_cache);
}

static void drop_uploads(struct e2b_tbuild *b)
{
    if (b->dir && sbx_rm_rf(b->dir) < 0)
        log_warn("e2b template build %s: removing %s: %s", b->id, b->dir, strerror(errno));
    free(b->dir);
    b->dir = NULL;
}

static void on_build_event(json_t *ev, void *data)
{
    json_decref(ev); /* read from the shared events array when asked */
}

static void on_build_end(void *data)
{
    struct e2b_tbuild *b = data;
    struct template_build *tb = b->watching;
    b->watching = NULL;
    drop_uploads(b);
    if (!strcmp(template_build_status(tb), "ready")) {
        struct sbx_err err = {0};
        if (e2b_tags_built(b->t->d, b->name, b->id, b->recipe_digest, b->tags, &err) < 0)
            log_warn("e2b template build %s: recording its tags: %s", b->id, err.msg);
    }
}

static const struct template_watch_ops watch_ops = {.on_event = on_build_event,
                                                    .on_end = on_build_end};

static void record_free(struct e2b_tbuild *b)
{
    if (b->watching)
        template_build_unwatch(b->watching, b);
    drop_uploads(b);
    json_decref(b->tags);
    json_decref(b->uploads);
    json_decref(b->step_of_run);
    json_decref(b->events);
    free(b);
}

/* Room for one more record: the oldest that is not being built goes. */
static int make_room(struct e2b_templates *t, struct sbx_err *err)
{
    size_t n = 0;
    struct e2b_tbuild **oldest = NULL;
    for (struct e2b_tbuild **p = &t->list; *p; p = &(*p)->next) {
        n++;
        if (!(*p)->watching)
            oldest = p;
    }
    if (n < E2B_BUILDS_MAX)
        return 0;
    if (!oldest)
        return sbx_err_set(err, EAGAIN, "template_build_limit",
                           "%d template builds are under way here: retry later", E2B_BUILDS_MAX);
    struct e2b_tbuild *old = *oldest;
    *oldest = old->next;
    record_free(old);
    return 0;
}

static struct e2b_tbuild *find(struct e2b_templates *t, const char *name, const char *id,
                               const char *user)
{
    for (struct e2b_tbuild *b = t->list; b; b = b->next)
        if (!strcmp(b->name, name) && (!id || !strcmp(b->id, id)) && !strcmp(b->who.user, user))
            return b;
    return NULL;
}

int e2b_templates_new(struct sbxd *d, struct e2b_templates **out, struct sbx_err *err)
{
    struct e2b_templates *t = sbx_xcalloc(1, sizeof(*t));
    t->d = d;
    /* Uploads of builds a previous run was waiting for: those records are gone. */
    _cleanup_free_ char *root = uploads_root(d);
    if (sbx_rm_rf(root) < 0 && errno != ENOENT) {
        free(t);
        return sbx_err_sys(err, errno, "removing %s", root);
    }
    *out = t;
    return 0;
}

void e2b_templates_free(struct e2b_templates *t)
{
    if (!t)
        return;
    while (t->list) {
        struct e2b_tbuild *b = t->list;
        t->list = b->next;
        record_free(b);
    }
    free(t);
}

bool e2b_template_building(struct e2b_templates *t, const char *name, const char *user)
{
    for (struct e2b_tbuild *b = t->list; b; b = b->next)
        if (!strcmp(b->name, name) && !strcmp(b->who.user, user) &&
            (b->state == EB_WAITING || b->watching))
            return true;
    return false;
}

/* --- POST /v3/templates ------------------------------------------------------------------ */

static void uuid4(char out[E2B_BUILD_ID_LEN + 1])
{
    char hex[33];
    sbx_random_id("", 16, hex, sizeof(hex));
    hex[12] = '4';
    hex[16] = "89ab"[hex[16] % 4];
    snprintf(out, E2B_BUILD_ID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
             hex + 16, hex + 20);
}

static void api_request_build(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *tags = NULL;
    char name[TEMPLATE_NAME_MAX + 1] = "";
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        return;
    if (r < 0)
        goto out;
    json_t *n = json_object_get(body, "name");
    if (!n || json_is_null(n))
        n = json_object_get(body, "alias"); /* deprecated, still sent by older SDKs */
    if (!json_is_string(n)) {
        sbx_err_set(&err, EINVAL, "invalid_request", "Name is required");
        goto out;
    }
    tags = json_array();
    if (e2b_parse_name(json_string_value(n), name, tags, &err) < 0 ||
        e2b_parse_tags(json_object_get(body, "tags"), tags, &err) < 0)
        goto out;
    if (!json_array_size(tags))
        json_array_append_new(tags, json_string(E2B_DEFAULT_TAG));
    /* The name is free, or the caller's own custom template (a new build of it). */
    if (e2b_template_owned(d, name, http_req_identity(req)->user, true, &err) < 0)
        goto out;
    struct e2b_templates *t = d->e2b_templates;
    if (make_room(t, &err) < 0)
        goto out;
    /* An earlier build of the name that never started is superseded, as on E2B. */
    for (struct e2b_tbuild *o = t->list; o; o = o->next)
        if (o->state == EB_WAITING && !strcmp(o->name, name) &&
            !strcmp(o->who.user, http_req_identity(req)->user)) {
            o->state = EB_SUPERSEDED;
            drop_uploads(o);
        }
    struct e2b_tbuild *b = sbx_xcalloc(1, sizeof(*b));
    b->t = t;
    uuid4(b->id);
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->who = *http_req_identity(req);
    sbx_random_id("", E2B_TOKEN_LEN / 2, b->token, sizeof(b->token));
    b->tags = json_incref(tags);
    b->uploads = json_object();
    b->created_ms = sbx_wall_ms();
    b->next = t->list;
    t->list = b;
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.build_request",
                 NULL, "ok", json_pack("{s:s,s:s,s:s,s:O}", "via", "e2b", "name", name,
                                       "build_id", b->id, "tags", tags));
    http_respond_json(req, 202,
                      json_pack("{s:s,s:s,s:[s],s:[s],s:O,s:b}", "templateID", name, "buildID",
                                b->id, "aliases", name, "names", name, "tags", tags, "public", 0));
out:
    if (err.code[0])
        e2b_fail(req, &err);
    json_decref(tags);
    json_decref(body);
}

/* --- COPY files: the link, then the upload ----------------------------------------------- */

static bool is_hash(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 64 && !s[n];
}

static void api_file_link(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    const char *name = http_req_param(req, 0), *hash = http_req_param(req, 1);
    struct e2b_tbuild *b = NULL;
    for (struct e2b_tbuild *o = d->e2b_templates->list; o && !b; o = o->next)
        if (o->state == EB_WAITING && !strcmp(o->name, name) &&
            !strcmp(o->who.user, http_req_identity(req)->user))
            b = o;
    if (!is_hash(hash)) {
        sbx_err_set(&err, EINVAL, "invalid_request", "Invalid files hash");
    } else if (!b) {
        sbx_err_set(&err, ENOENT, "template_build_not_found",
                    "no build of template %.64s waits for its files here", name);
    } else if (json_object_get(b->uploads, hash)) {
        http_respond_json(req, 201, json_pack("{s:b}", "present", 1));
        return;
    } else {
        http_respond_json(req, 201,
                          json_pack("{s:b,s:o}", "present", 0, "url",
                                    json_sprintf("%s/e2b/api/templates/%s/builds/%s/files/%s"
                                                 "?token=%s",
                                                 d->cfg.public_url, b->name, b->id, hash,
                                                 b->token)));
        return;
    }
    e2b_fail(req, &err);
}

struct upload {
    struct sbxd *d;
    char name[TEMPLATE_NAME_MAX + 1];
    char build[E2B_BUILD_ID_LEN + 1];
    char hash[65];
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    struct sbx_err pre; /* refused before the body: answered once it is read */
    int fd;
    char *part;
    long long size;
    EVP_MD_CTX *sha;
};

static void upload_free(struct upload *u)
{
    if (u->fd >= 0)
        close(u->fd);
    if (u->part)
        (void)unlink(u->part);
    free(u->part);
    EVP_MD_CTX_free(u->sha);
    free(u);
}

/* The build the upload is for, if it still waits for its files. */
static struct e2b_tbuild *upload_build(struct upload *u)
{
    for (struct e2b_tbuild *b = u->d->e2b_templates->list; b; b = b->next)
        if (b->state == EB_WAITING && !strcmp(b->id, u->build) && !strcmp(b->name, u->name))
            return b;
    return NULL;
}

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    if (u->pre.code[0]) {
        *err = u->pre;
        return -1;
    }
    struct e2b_tbuild *b = upload_build(u);
    if (!b)
        return sbx_err_set(err, ENOENT, "template_build_not_found",
                           "the build this upload was for does not wait for files any more");
    u->size += (long long)len;
    if (u->size > E2B_UPLOAD_MAX || b->upload_bytes + u->size > TEMPLATE_INPUTS_BYTES)
        return sbx_err_set(err, EFBIG, "file_too_large",
                           "a COPY step's files take at most %lld MiB, a build's %lld MiB",
                           E2B_UPLOAD_MAX >> 20, TEMPLATE_INPUTS_BYTES >> 20);
    int r = sbx_write_all(u->fd, buf, len);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing the upload");
    if (EVP_DigestUpdate(u->sha, buf, len) != 1)
        return sbx_err_set(err, EIO, "internal", "hashing the upload");
    return 0;
}

static void upload_end(struct http_req *req, void *data)
{
    struct upload *u = data;
    struct sbx_err err = u->pre;
    struct e2b_tbuild *b = upload_build(u);
    unsigned char md[32];
    unsigned mdlen = 0;
    char sha[65];
    if (!err.code[0] && !b)
        sbx_err_set(&err, ENOENT, "template_build_not_found",
                    "the build this upload was for does not wait for files any more");
    if (!err.code[0] && json_object_size(b->uploads) >= TEMPLATE_INPUTS_MAX)
        sbx_err_set(&err, EAGAIN, "invalid_request", "a build takes at most %d COPY uploads",
                    TEMPLATE_INPUTS_MAX);
    if (!err.code[0] && (EVP_DigestFinal_ex(u->sha, md, &mdlen) != 1 || mdlen != 32))
        sbx_err_set(&err, EIO, "internal", "hashing the upload");
    _cleanup_free_ char *dst = b ? sbx_xasprintf("%s/%s", b->dir, u->hash) : NULL;
    if (!err.code[0] && rename(u->part, dst) < 0)
        sbx_err_sys(&err, errno, "keeping the upload");
    if (b)
        audit_record(u->d->store, &b->who, NULL, u->request_id, "template.upload", NULL,
                     err.code[0] ? err.code : "ok",
                     json_pack("{s:s,s:s,s:s,s:s,s:I}", "via", "e2b", "name", u->name,
                               "build_id", u->build, "files_hash", u->hash, "bytes",
                               (json_int_t)u->size));
    if (err.code[0]) {
        e2b_fail(req, &err);
        upload_free(u);
        return;
    }
    free(u->part);
    u->part = NULL;
    sbx_hex(md, 32, sha);
    if (!json_object_get(b->uploads, u->hash))
        b->upload_bytes += u->size;
    json_object_set_new(b->uploads, u->hash,
                        json_pack("{s:s,s:I}", "sha256", sha, "size", (json_int_t)u->size));
    http_respond_text(req, 200, "");
    upload_free(u);
}

static void upload_abort(struct http_req *req, void *data)
{
    upload_free(data);
}

static const struct http_body_sink upload_sink = {
    .on_data = upload_data, .on_end = upload_end, .on_failed = upload_abort};

/* The link answers this, not the API key: the SDK sends the body with nothing but the
 * link (as to E2B's storage bucket). */
static void api_file_upload(struct sbxd *d, struct http_req *req)
{
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->d = d;
    u->fd = -1;
    snprintf(u->name, sizeof(u->name), "%s", http_req_param(req, 0));
    snprintf(u->build, sizeof(u->build), "%s", http_req_param(req, 1));
    snprintf(u->hash, sizeof(u->hash), "%s", http_req_param(req, 2));
    snprintf(u->request_id, sizeof(u->request_id), "%s", http_req_id(req) ?: "");
    const char *token = http_req_query(req, "token");
    struct e2b_tbuild *b = upload_build(u);
    uint64_t len;
    if (!b || !token || strlen(token) != E2B_TOKEN_LEN ||
        CRYPTO_memcmp(token, b->token, E2B_TOKEN_LEN) ||
        !is_hash(http_req_param(req, 2))) {
        sbx_err_set(&u->pre, EACCES, "invalid_signature",
                    "this upload link is not one this server gave, or its build moved on");
    } else if (http_req_content_length(req, &len) && len > (uint64_t)E2B_UPLOAD_MAX) {
        sbx_err_set(&u->pre, EFBIG, "file_too_large", "a COPY step's files take at most %lld MiB",
                    E2B_UPLOAD_MAX >> 20);
    } else {
        _cleanup_free_ char *root = uploads_root(d);
        if (!b->dir)
            b->dir = sbx_xasprintf("%s/%s", root, b->id);
        u->part = sbx_xasprintf("%s/.%s.part.XXXXXX", b->dir, u->hash);
        if (sbx_mkdir_p(b->dir, 0700) < 0 || (u->fd = mkostemp(u->part, O_CLOEXEC)) < 0) {
            sbx_err_sys(&u->pre, errno, "storing the upload");
            free(u->part);
            u->part = NULL;
        }
        u->sha = EVP_MD_CTX_new();
        if (!u->sha || EVP_DigestInit_ex(u->sha, EVP_sha256(), NULL) != 1)
            sbx_err_set(&u->pre, EIO, "internal", "hashing the upload");
    }
    http_req_stream_body(req, &upload_sink, u, upload_abort);
}

/* --- POST /v2/templates/{id}/builds/{build}: the steps ----------------------------------- */

/* s in single quotes, for sh. */
static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* A COPY step in the build sandbox, as root: $1 the uploaded tar (gzipped or not), $2 the
 * source as the SDK named it (a path or a glob, relative to its context), $3 the target
 * (relative ones from the step's workdir), $4 the owner ("" keeps root), $5 the mode. A
 * directory is merged into the target; a file lands at the target, or inside it when the
 * target ends with "/" or is a directory (Docker's COPY). */
static const char COPY_SCRIPT[] =
    "set -e\n"
    "u=$(mktemp -d /tmp/e2b-copy.XXXXXX)\n"
    "tar -xf \"$1\" -C \"$u\" --no-same-owner\n"
    "case \"$3\" in /*) t=$3 ;; *) t=$(pwd)/$3 ;; esac\n"
    "cd \"$u\"\n"
    "IFS=\n"
    "n=0\n"
    "for e in $2; do\n"
    "  [ -e \"$e\" ] || [ -L \"$e\" ] || continue\n"
    "  n=$((n+1))\n"
    "  [ -z \"$4\" ] || chown -hR \"$4\" \"$e\"\n"
    "  [ -z \"$5\" ] || [ -L \"$e\" ] || chmod -R \"$5\" \"$e\"\n"
    "  if [ -d \"$e\" ] && [ ! -L \"$e\" ]; then\n"
    "    mkdir -p \"$t\"\n"
    "    (cd \"$e\" && tar -cf - .) | tar -xf - -C \"$t\" --keep-directory-symlink "
    "--no-overwrite-dir\n"
    "  else\n"
    "    case \"$t\" in */) mkdir -p \"$t\" ;; *) mkdir -p \"$(dirname \"$t\")\" ;; esac\n"
    "    d=$t\n"
    "    if [ -d \"$t\" ] && [ ! -L \"$t\" ]; then d=${t%/}/$(basename \"$e\"); fi\n"
    "    mv -f \"$e\" \"$d\"\n"
    "  fi\n"
    "done\n"
    "cd /\n"
    "rm -rf \"$u\"\n"
    "[ \"$n\" -gt 0 ] || { echo \"COPY: nothing named $2 in the uploaded files\" >&2; exit 1; }\n";

/* What ENV, WORKDIR and USER steps set for the steps after them. */
struct step_ctx {
    const char *user;    /* NULL: root (sbx builds run as root) */
    const char *workdir; /* NULL: the build's (/root) */
    json_t *env;         /* {name: value} */
};

static void prelude(FILE *f, const struct step_ctx *c)
{
    if (c->workdir) {
        fputs("mkdir -p ", f);
        sh_quote(f, c->workdir);
        fputs(" && cd ", f);
        sh_quote(f, c->workdir);
        fputs(" || exit 1\n", f);
    }
    const char *k;
    json_t *v;
    json_object_foreach(c->env, k, v)
    {
        fprintf(f, "export %s=", k);
        sh_quote(f, json_string_value(v));
        fputc('\n', f);
    }
}

static bool name_like(const char *s, const char *first, const char *rest, size_t max)
{
    size_t n = strlen(s);
    return n && n <= max && strchr(first, s[0]) && strspn(s + 1, rest) == n - 1;
}

#define LOWER "abcdefghijklmnopqrstuvwxyz_"
#define ENV_FIRST "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
#define ENV_REST ENV_FIRST "0123456789"

static bool valid_user(const char *s)
{
    return name_like(s, LOWER, LOWER "0123456789-", 32);
}

/* Is path in what every sandbox mounts over its template (its workspace)? */
static bool in_workspace(const char *path)
{
    static const char *const mounts[] = {E2B_HOME, E2B_WORKSPACE};
    for (size_t i = 0; path && i < SBX_ARRAY_SIZE(mounts); i++) {
        size_t n = strlen(mounts[i]);
        if (!strncmp(path, mounts[i], n) && (!path[n] || path[n] == '/'))
            return true;
    }
    return false;
}

/* Step i of an E2B build as a recipe run step (appended to run, with its E2B step number
 * to step_of), or a change of ctx; inputs gets the upload a COPY uses. */
static int translate_step(struct e2b_tbuild *b, size_t i, json_t *step, struct step_ctx *c,
                          json_t *run, json_t *step_of, json_t *inputs, struct sbx_err *err)
{
    const char *type = json_string_value(json_object_get(step, "type"));
    json_t *args = json_object_get(step, "args");
    size_t nargs = json_array_size(args);
    for (size_t a = 0; a < nargs; a++)
        if (!json_is_string(json_array_get(args, a)))
            return sbx_err_set(err, EINVAL, "invalid_request", "step %zu: args must be strings",
                               i + 1);
#define ARG(a) (nargs > (a) ? json_string_value(json_array_get(args, (a))) : "")
    if (!type)
        return sbx_err_set(err, EINVAL, "invalid_request", "step %zu: type is required", i + 1);
    if (!strcmp(type, "ENV")) {
        if (nargs % 2)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "step %zu: ENV takes name, value pairs", i + 1);
        for (size_t a = 0; a < nargs; a += 2) {
            if (!name_like(ARG(a), ENV_FIRST, ENV_REST, 128))
                return sbx_err_set(err, EINVAL, "invalid_request",
                                   "step %zu: %.64s is not a variable name", i + 1, ARG(a));
            json_object_set_new(c->env, ARG(a), json_string(ARG(a + 1)));
        }
        return 0;
    }
    if (!strcmp(type, "WORKDIR") || !strcmp(type, "USER")) {
        if (nargs != 1 || !*ARG(0) ||
            (!strcmp(type, "USER") ? !valid_user(ARG(0)) : strlen(ARG(0)) > RECIPE_FILE_PATH_MAX))
            return sbx_err_set(err, EINVAL, "invalid_request", "step %zu: a bad %s", i + 1,
                               type);
        if (!strcmp(type, "USER"))
            c->user = strcmp(ARG(0), "root") ? ARG(0) : NULL;
        else
            c->workdir = ARG(0);
        return 0;
    }
    if (json_array_size(run) >= RECIPE_RUN_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "a build takes at most %d RUN and COPY steps here", RECIPE_RUN_MAX);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return sbx_err_sys(err, errno, "building step %zu", i + 1);
    prelude(f, c);
    int r = 0;
    if (!strcmp(type, "RUN")) {
        const char *user = nargs > 1 && *ARG(1) ? ARG(1) : c->user;
        if (nargs < 1 || nargs > 2 || (user && !valid_user(user)))
            r = sbx_err_set(err, EINVAL, "invalid_request", "step %zu: RUN takes a command and "
                            "a user", i + 1);
        else if (!user || !strcmp(user, "root"))
            fputs(ARG(0), f);
        else {
            /* runuser keeps the exported variables and the directory. */
            fputs("exec runuser -u ", f);
            sh_quote(f, user);
            fputs(" -- /bin/sh -c ", f);
            sh_quote(f, ARG(0));
        }
    } else if (!strcmp(type, "COPY")) {
        const char *hash = json_string_value(json_object_get(step, "filesHash"));
        json_t *up = hash ? json_object_get(b->uploads, hash) : NULL;
        const char *owner = *ARG(2) ? ARG(2) : c->user ? c->user : "";
        const char *mode = ARG(3);
        if (nargs < 2 || !*ARG(0) || !*ARG(1))
            r = sbx_err_set(err, EINVAL, "invalid_request",
                            "step %zu: COPY takes a source and a target", i + 1);
        else if (!up)
            r = sbx_err_set(err, EINVAL, "invalid_request",
                            "step %zu: the files of COPY %.200s were not uploaded", i + 1,
                            ARG(0));
        else if (in_workspace(ARG(1)[0] == '/' ? ARG(1) : c->workdir))
            r = sbx_err_set(err, EINVAL, "invalid_request",
                            "step %zu: COPY to %.200s: /home/user is each sandbox's own workspace, "
                            "not part of a template (copy elsewhere, e.g. /opt/app)",
                            i + 1, ARG(1));
        else if (*owner && !name_like(owner, LOWER, LOWER "0123456789-:", 65))
            r = sbx_err_set(err, EINVAL, "invalid_request", "step %zu: a bad owner", i + 1);
        else if (*mode && (strlen(mode) > 4 || strspn(mode, "01234567") != strlen(mode)))
            r = sbx_err_set(err, EINVAL, "invalid_request", "step %zu: a bad mode", i + 1);
        else {
            /* Named by what was uploaded, so that the recipe digest covers the files. */
            const char *sha = json_string_value(json_object_get(up, "sha256"));
            char input[80];
            snprintf(input, sizeof(input), "e2b-%s.tar", sha);
            fputs("/bin/sh -c ", f);
            sh_quote(f, COPY_SCRIPT);
            fputs(" e2b-copy ", f);
            _cleanup_free_ char *path = sbx_xasprintf("%s/%s", TEMPLATE_INPUTS_DIR, input);
            const char *const qs[] = {path, ARG(0), ARG(1), owner, mode};
            for (size_t q = 0; q < SBX_ARRAY_SIZE(qs); q++) {
                sh_quote(f, qs[q]);
                fputc(' ', f);
            }
            _cleanup_free_ char *host = sbx_xasprintf("%s/%s", b->dir, hash);
            size_t k;
            json_t *have;
            bool dup = false;
            json_array_foreach(inputs, k, have) dup |=
                !strcmp(json_string_value(json_object_get(have, "name")), input);
            if (!dup)
                json_array_append_new(inputs,
                                      json_pack("{s:s,s:s}", "name", input, "path", host));
        }
    } else {
        r = sbx_err_set(err, EINVAL, "invalid_request",
                        "step %zu: %.32s steps are not supported here (RUN, COPY, ENV, WORKDIR "
                        "and USER are)",
                        i + 1, type);
    }
#undef ARG
    if (fclose(f) != 0 && r == 0)
        r = sbx_err_sys(err, errno, "building step %zu", i + 1);
    if (r < 0)
        return r;
    if (len > RECIPE_COMMAND_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "step %zu is longer than %d bytes once written out", i + 1,
                           RECIPE_COMMAND_MAX);
    json_array_append_new(run, json_string(text));
    json_array_append_new(step_of, json_sprintf("%zu", i + 1));
    return 0;
}

/* What the build starts from: an sbx template (fromTemplate, or fromImage of one sbx
 * exports as a Docker image, sbx-NAME[:latest]; E2B's own base images are base). A Docker
 * image sbx does not have is refused: sbx builds on its templates, not on registries. */
static int base_of(json_t *body, char *out, size_t cap, struct sbx_err *err)
{
    const char *tmpl = json_string_value(json_object_get(body, "fromTemplate"));
    const char *image = json_string_value(json_object_get(body, "fromImage"));
    json_t *reg = json_object_get(body, "fromImageRegistry");
    if ((tmpl && *tmpl) == (image && *image))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "exactly one of fromImage or fromTemplate must be given");
    if (tmpl && *tmpl) {
        snprintf(out, cap, "%s", e2b_template_base(tmpl));
        return 0;
    }
    if (reg && !json_is_null(reg))
        return sbx_err_set(err, EINVAL, "invalid_template",
                           "registry credentials (fromImageRegistry) are not supported here: "
                           "sbx builds on its own templates (see docs/e2b.md)");
    size_t n = strcspn(image, ":@");
    const char *tag = image + n;
    if (!strncmp(image, "e2bdev/", 7) &&
        (!strncmp(image, "e2bdev/base", n) || !strncmp(image, "e2bdev/code-interpreter", n)) &&
        (n == 11 || n == 23)) {
        snprintf(out, cap, "base");
        return 0;
    }
    if (!strncmp(image, "sbx-", 4) && n > 4 && n - 4 <= TEMPLATE_NAME_MAX &&
        (!*tag || !strcmp(tag, ":latest"))) {
        snprintf(out, cap, "%.*s", (int)(n - 4), image + 4);
        if (template_name_valid(out))
            return 0;
    }
    return sbx_err_set(err, EINVAL, "invalid_template",
                       "the image %.200s is not available on this sbx server: builds start "
                       "from sbx templates (fromTemplate('base'), or fromImage('sbx-NAME') for "
                       "template NAME; see docs/e2b.md)",
                       image);
}

static int make_recipe(struct e2b_tbuild *b, json_t *body, json_t **recipe, json_t **inputs,
                       struct sbx_err *err)
{
    char from[TEMPLATE_NAME_MAX + 1];
    json_t *steps = json_object_get(body, "steps");
    json_t *start = json_object_get(body, "startCmd"), *ready = json_object_get(body, "readyCmd");
    if (base_of(body, from, sizeof(from), err) < 0)
        return -EINVAL;
    if (steps && !json_is_null(steps) && !json_is_array(steps))
        return sbx_err_set(err, EINVAL, "invalid_request", "steps must be a list");
    if (json_array_size(steps) > E2B_STEPS_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "a build takes at most %d steps here",
                           E2B_STEPS_MAX);
    if ((start && !json_is_null(start) && !json_is_string(start)) ||
        (ready && !json_is_null(ready) && !json_is_string(ready)))
        return sbx_err_set(err, EINVAL, "invalid_request", "startCmd and readyCmd are commands");
    json_t *run = json_array(), *step_of = json_array(), *in = json_array();
    struct step_ctx c = {.env = json_object()};
    size_t i;
    json_t *s;
    int r = 0;
    json_array_foreach(steps, i, s)
    {
        if (!json_is_object(s))
            r = sbx_err_set(err, EINVAL, "invalid_request", "step %zu must be an object", i + 1);
        else
            r = translate_step(b, i, s, &c, run, step_of, in, err);
        if (r < 0)
            break;
    }
    /* ENV also reaches the sandboxes' login shells, where the SDK runs commands. */
    if (r == 0 && json_object_size(c.env)) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) {
            r = sbx_err_sys(err, errno, "writing the ENV steps");
        } else {
            fputs("mkdir -p /etc/profile.d && printf '%s\\n'", f);
            const char *k;
            json_t *v;
            json_object_foreach(c.env, k, v)
            {
                _cleanup_free_ char *line = NULL;
                size_t ll = 0;
                FILE *g = open_memstream(&line, &ll);
                if (g) {
                    fprintf(g, "export %s=", k);
                    sh_quote(g, json_string_value(v));
                    (void)fclose(g);
                }
                fputc(' ', f);
                sh_quote(f, line ? line : "");
            }
            fputs(" >/etc/profile.d/e2b-template-env.sh", f);
            if (fclose(f) != 0)
                r = sbx_err_sys(err, errno, "writing the ENV steps");
            else if (len > RECIPE_COMMAND_MAX || json_array_size(run) >= RECIPE_RUN_MAX)
                r = sbx_err_set(err, EINVAL, "invalid_request",
                                "the ENV steps take more than a build holds here");
            else {
                json_array_append_new(run, json_string(text));
                json_array_append_new(step_of, json_string("finalize"));
            }
        }
    }
    json_decref(c.env);
    if (r < 0) {
        json_decref(run);
        json_decref(step_of);
        json_decref(in);
        return r;
    }
    *recipe = json_pack("{s:s,s:s,s:o}", "name", b->name, "from", from, "run", run);
    if (json_is_string(start) && *json_string_value(start))
        json_object_set(*recipe, "start_command", start);
    if (json_is_string(ready) && *json_string_value(ready))
        json_object_set(*recipe, "ready_check", ready);
    json_decref(b->step_of_run);
    b->step_of_run = step_of;
    *inputs = in;
    return 0;
}

static void api_start_build(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *recipe = NULL, *inputs = NULL;
    if (e2b_authenticate(d, req) < 0)
        return;
    const char *user = http_req_identity(req)->user;
    struct e2b_tbuild *b = find(d->e2b_templates, http_req_param(req, 0), http_req_param(req, 1),
                                user);
    struct template_build *tb = NULL;
    bool cached = false;
    int r;
    if (!b) {
        sbx_err_set(&err, ENOENT, "template_build_not_found", "Build '%.64s' not found",
                    http_req_param(req, 1));
        goto out;
    }
    if (b->state != EB_WAITING) {
        sbx_err_set(&err, EINVAL, "invalid_request",
                    b->state == EB_SUPERSEDED ? "the build was superseded by a newer one"
                                              : "build is not in waiting state");
        goto out;
    }
    if (http_req_json(req, &body, &err) < 0 || make_recipe(b, body, &recipe, &inputs, &err) < 0)
        goto out;
    r = template_build_start_with(d->builds, http_req_identity(req), recipe, inputs, &tb, &cached,
                                  &err);
    json_t *steps = json_object_get(recipe, "run");
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.build", NULL,
                 r < 0 ? err.code : cached ? "cached" : "started",
                 json_pack("{s:s,s:s,s:s,s:O}", "via", "e2b", "name", b->name, "build_id", b->id,
                           "run", steps));
    if (r < 0)
        goto out;
    json_t *j = template_build_json(tb);
    snprintf(b->recipe_digest, sizeof(b->recipe_digest), "%s",
             json_string_value(json_object_get(j, "recipe_digest")));
    json_decref(j);
    b->state = EB_STARTED;
    b->started_ms = sbx_wall_ms();
    b->events = json_incref(template_build_events(tb));
    b->watching = tb;
    /* A finished build (the same recipe built before) ends the watch at once. */
    if (template_build_watch(tb, &watch_ops, b) < 0) {
        b->watching = NULL;
        log_warn("e2b template build %s: cannot follow %s", b->id, b->name);
    }
    http_respond_text(req, 202, "");
out:
    if (err.code[0])
        e2b_fail(req, &err);
    json_decref(inputs);
    json_decref(recipe);
    json_decref(body);
}

/* --- GET .../status: the build's events as E2B's log entries ----------------------------- */

/* E2B's step of an sbx step label: "base" while the sandbox starts, the step's number for
 * a run step, "finalize" for the start and ready commands and the sealing. */
static const char *e2b_step(const struct e2b_tbuild *b, const char *label)
{
    unsigned k, n;
    if (!label)
        return NULL;
    if (sscanf(label, "run %u/%u", &k, &n) == 2 && k >= 1)
        return json_string_value(json_array_get(b->step_of_run, k - 1));
    if (!strcmp(label, "prepare") || !strcmp(label, "boot"))
        return "base";
    return "finalize";
}

static json_t *entry(long long ms, const char *level, const char *msg, const char *step)
{
    char when[40];
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof(when) - n, ".%03lldZ", ms % 1000);
    return json_pack("{s:s,s:s,s:s,s:s?}", "timestamp", when, "level", level, "message", msg,
                     "step", step);
}

/* Every log entry of the build so far, and its reason when it failed. */
static json_t *entries(const struct e2b_tbuild *b, json_t **reason)
{
    json_t *out = json_array(), *ev;
    size_t i;
    long long t = b->started_ms;
    const char *label = NULL;
    json_array_foreach(b->events, i, ev)
    {
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *el = json_object_get(ev, "elapsed_ms");
        if (json_is_integer(el))
            t = b->started_ms + json_integer_value(el);
        if (!type)
            continue;
        if (!strcmp(type, "step")) {
            label = json_string_value(json_object_get(ev, "step"));
            char msg[96];
            snprintf(msg, sizeof(msg), "[%lld/%lld] %s",
                     (long long)json_integer_value(json_object_get(ev, "index")),
                     (long long)json_integer_value(json_object_get(ev, "total")), label);
            json_array_append_new(out, entry(t, "debug", msg, e2b_step(b, label)));
        } else if (!strcmp(type, "log")) {
            json_array_append_new(out, entry(t, "info",
                                             json_string_value(json_object_get(ev, "line")),
                                             e2b_step(b, label)));
        } else if (!strcmp(type, "log_truncated")) {
            json_array_append_new(out, entry(t, "warn", "the build's log was cut here (1 MiB)",
                                             e2b_step(b, label)));
        } else if (!strcmp(type, "done")) {
            json_array_append_new(out, entry(t, "info",
                                             json_is_true(json_object_get(ev, "cached"))
                                                 ? "Template is ready (the same steps were "
                                                   "built before)"
                                                 : "Template is ready",
                                             "finalize"));
        } else if (!strcmp(type, "error")) {
            json_t *e = json_object_get(ev, "error");
            const char *step = e2b_step(b, json_string_value(json_object_get(e, "step")));
            const char *tail = json_string_value(json_object_get(e, "stderr_tail"));
            _cleanup_free_ char *msg = sbx_xasprintf(
                "%s%s%s%s%s", step && isdigit((unsigned char)*step) ? "step " : "",
                step && isdigit((unsigned char)*step) ? step : "",
                step && isdigit((unsigned char)*step) ? ": " : "",
                json_string_value(json_object_get(e, "message")) ?: "the build failed",
                tail && *tail ? ": " : "");
            if (tail && *tail) {
                /* Its last lines: the SDK shows the message, and E2B's says what broke. */
                size_t n = strlen(tail);
                while (n && tail[n - 1] == '\n')
                    n--;
                const char *from = tail + (n > 512 ? n - 512 : 0);
                char *joined = sbx_xasprintf("%s%.*s", msg, (int)(tail + n - from), from);
                free(msg);
                msg = joined;
            }
            json_array_append_new(out, entry(t, "error", msg, step));
            *reason = json_pack("{s:s,s:s?,s:[o]}", "message", msg, "step", step, "logEntries",
                                entry(t, "error", msg, step));
        }
    }
    return out;
}

static void api_build_status(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    long long offset = 0, limit = E2B_LOGS_PAGE;
    if (e2b_authenticate(d, req) < 0)
        return;
    struct e2b_tbuild *b = find(d->e2b_templates, http_req_param(req, 0), http_req_param(req, 1),
                                http_req_identity(req)->user);
    if (!b) {
        sbx_err_set(&err, ENOENT, "template_build_not_found",
                    "Build '%.64s' not found (builds are forgotten when sbxd restarts)",
                    http_req_param(req, 1));
        e2b_fail(req, &err);
        return;
    }
    if (http_req_query_int(req, "logsOffset", 0, 1ll << 30, "invalid_request", &offset, &err) <
            0 ||
        http_req_query_int(req, "limit", 0, E2B_LOGS_PAGE, "invalid_request", &limit, &err) < 0) {
        e2b_fail(req, &err);
        return;
    }
    const char *status = "waiting";
    json_t *reason = NULL, *all = json_array(), *page = json_array();
    if (b->state == EB_SUPERSEDED) {
        status = "error";
        reason = json_pack("{s:s,s:[]}", "message",
                           "The build was canceled because it was superseded by a newer one.",
                           "logEntries");
    } else if (b->state == EB_STARTED) {
        json_decref(all);
        all = entries(b, &reason);
        json_t *last = json_array_get(b->events, json_array_size(b->events) - 1);
        const char *type = json_string_value(json_object_get(last, "type"));
        status = type && !strcmp(type, "done") ? "ready" : reason ? "error" : "building";
    }
    for (size_t i = (size_t)offset; i < json_array_size(all) && json_array_size(page) < (size_t)limit;
         i++)
        json_array_append(page, json_array_get(all, i));
    json_decref(all);
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:[]}", "templateID", b->name, "buildID", b->id,
                          "status", status, "logEntries", page, "logs");
    if (reason)
        json_object_set_new(o, "reason", reason);
    http_respond_json(req, 200, o);
}

static const struct route routes[] = {
    {"POST", "/e2b/api/v3/templates", AUTH_PUBLIC, api_request_build, 0},
    {"GET", "/e2b/api/templates/{}/files/{}", AUTH_PUBLIC, api_file_link, 0},
    {"PUT", "/e2b/api/templates/{}/builds/{}/files/{}", AUTH_PUBLIC, api_file_upload,
     ROUTE_STREAM_BODY},
    {"POST", "/e2b/api/v2/templates/{}/builds/{}", AUTH_PUBLIC, api_start_build, 0},
    {"GET", "/e2b/api/templates/{}/builds/{}/status", AUTH_PUBLIC, api_build_status, 0},
};

const struct route_table e2b_template_routes = ROUTE_TABLE(routes);
