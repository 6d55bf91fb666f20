#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/mounts.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../egress/policy.h"
#include "../../proto/proto.h"
#include "../exec/exec.h"
#include "../sandbox/runas.h"
#include "../sandbox/template.h"
#include "build_internal.h"
#include "build_scripts.h"
#include "recipe.h"
#include "tree.h"

/* --- events ----------------------------------------------------------------------------- */

/* ch is the channel's (PROTO_CH_STDOUT or PROTO_CH_STDERR); build_output counts the streams
 * from 0, stdout first. */
static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct template_build *tb = data;
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR)
        return;
    if (tb->steps[tb->cur].kind != S_FINISH) /* the finish step's output is data, not log */
        build_output(tb, ch - PROTO_CH_STDOUT, buf, len);
}

/* --- the build sandbox ------------------------------------------------------------------ */

static struct sandbox *build_sandbox(struct template_build *tb)
{
    static const struct auth_identity nobody = {0};
    struct sandbox *sb = NULL;
    struct sbx_err err = {0};
    if (!tb->sandbox_id[0] || manager_lookup(tb->b->mgr, &nobody, tb->sandbox_id, &sb, &err) < 0)
        return NULL;
    return sb->ended || !sandbox_is_build(sb) ? NULL : sb;
}

static void stop_sandbox(struct template_build *tb)
{
    struct sandbox *sb = build_sandbox(tb);
    struct sbx_err err = {0};
    if (sb && manager_destroy(tb->b->mgr, sb, "template_build", &err) < 0)
        log_error("template build %s: stopping sandbox %s: %s", tb->id, sb->rec.id, err.msg);
    tb->sandbox_id[0] = '\0';
}

/* --- failure and the end ---------------------------------------------------------------- */

struct remove_job {
    char *path;
    char why[TREE_ERR_MAX];
};

static void remove_run(void *data)
{
    struct remove_job *j = data;
    (void)sbx_umount_beneath(j->path); /* a failed build's overlay */
    if (tree_remove(j->path, j->why) < 0)
        log_error("removing %s: %s", j->path, j->why);
}

static void remove_done(void *data, bool ran)
{
    struct remove_job *j = data;
    free(j->path);
    free(j);
}

void build_remove_later(struct template_builds *b, const char *path)
{
    struct remove_job *j = sbx_xcalloc(1, sizeof(*j));
    j->path = sbx_xstrdup(path);
    jobs_submit(b->jobs, remove_run, remove_done, j);
}

static void tail_of(json_t *o, const char *key, const struct exec_output *out)
{
    if (!out || !out->len)
        return;
    size_t n = out->len > TEMPLATE_LOG_TAIL ? TEMPLATE_LOG_TAIL : out->len;
    const char *s = out->buf + out->len - n;
    /* Start at a character boundary. */
    while (n && ((unsigned char)*s & 0xC0) == 0x80) {
        s++;
        n--;
    }
    json_object_set_new(o, key, build_text_json(s, n));
}

static void fail(struct template_build *tb, const char *code, const char *msg,
                 const struct exec_result *res)
{
    build_flush_lines(tb);
    const char *label = tb->steps[tb->cur].label;
    tb->error = json_pack("{s:s,s:s,s:s}", "step", label, "code", code, "message", msg);
    if (res) {
        json_object_set_new(tb->error, "exit_code", json_integer(res->exit_code));
        tail_of(tb->error, "stdout_tail", &res->out[0]);
        tail_of(tb->error, "stderr_tail", &res->out[1]);
    }
    tb->status = TB_FAILED;
    tb->finished_at = sbx_wall_ms() / 1000;
    log_warn("template build %s (%s for %s): failed at %s: %s", tb->id, tb->name, tb->owner, label,
             msg);
    json_t *ev = json_pack("{s:s,s:s,s:O,s:I}", "type", "error", "status", "failed", "error",
                           tb->error, "elapsed_ms", (json_int_t)(sbx_now_ms() - tb->t0_ms));
    build_emit(tb, ev);
    tb->run = NULL;
    stop_sandbox(tb);
    if (tb->tmp)
        build_remove_later(tb->b, tb->tmp);
    build_end_watchers(tb);
}

/* --- steps ------------------------------------------------------------------------------ */

static void next_step(struct template_build *tb);

static void step_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct template_build *tb = data;
    tb->run = NULL;
    build_flush_lines(tb);
    if (err) {
        fail(tb, "template_build_failed", err->msg, NULL);
        return;
    }
    if (res->timed_out || res->exit_code != 0) {
        char msg[160];
        if (res->timed_out)
            snprintf(msg, sizeof(msg), "%s ran out of time (%d s)", tb->steps[tb->cur].label,
                     tb->steps[tb->cur].kind == S_READY ? TEMPLATE_READY_TIMEOUT_S + 30
                                                        : TEMPLATE_STEP_TIMEOUT_S);
        else
            snprintf(msg, sizeof(msg), "%s exited with %d", tb->steps[tb->cur].label,
                     res->exit_code);
        fail(tb, "template_build_failed", msg, res);
        return;
    }
    if (tb->steps[tb->cur].kind == S_FINISH) {
        /* dpkg's list, then a line "--npm--", then name@version of the global packages. */
        json_decref(tb->installed);
        json_decref(tb->npm_list);
        tb->installed = json_array();
        tb->npm_list = json_array();
        /* Exec output is counted bytes, not a string. */
        _cleanup_free_ char *out = sbx_xmalloc(res->out[0].len + 1);
        if (res->out[0].len)
            memcpy(out, res->out[0].buf, res->out[0].len);
        out[res->out[0].len] = '\0';
        json_t *into = tb->installed;
        char *save = NULL;
        for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            if (!strcmp(l, "--npm--"))
                into = tb->npm_list;
            else if (*l && sbx_utf8_valid(l, strlen(l)))
                json_array_append_new(into, json_string(l));
        }
    }
    tb->cur++;
    next_step(tb);
}

static const struct exec_observer step_obs = {.on_output = on_output, .on_done = step_done};

static void run_cmd(struct template_build *tb, json_t *argv, long long timeout_s)
{
    struct sandbox *sb = build_sandbox(tb);
    if (!sb) {
        json_decref(argv);
        fail(tb, "template_build_failed", "the build sandbox went away", NULL);
        return;
    }
    static const struct auth_identity nobody = {0};
    json_t *env = json_pack("{s:s,s:s}", "DEBIAN_FRONTEND", "noninteractive", "LC_ALL", "C.UTF-8");
    struct exec_params p = {
        .argv = argv,
        .env = env,
        .cwd = "/root",
        .user = RUNAS_ROOT,
        .timeout_s = timeout_s,
        .command = json_string_value(json_array_get(argv, 2)),
        .language = "shell",
        .cwd_given = true,
        .timeout_given = true,
    };
    struct exec_origin o = {.who = &nobody, .action = "exec"};
    struct sbx_err err = {0};
    int r = exec_start(sb, &p, &o, &step_obs, tb, &tb->run, &err);
    json_decref(argv);
    json_decref(env);
    if (r < 0)
        fail(tb, "template_build_failed", err.msg, NULL);
}

static json_t *sh(const char *script)
{
    return json_pack("[s,s,s,s]", "/bin/sh", "-c", script, "sh");
}

static void seal(struct template_build *tb);
static void on_booted(struct sandbox *sb, const struct sbx_err *err, void *data);

static void next_step(struct template_build *tb)
{
    if (tb->cur >= tb->nsteps)
        return;
    const struct step *s = &tb->steps[tb->cur];
    build_step_event(tb);
    const struct recipe *r = &tb->recipe;
    json_t *argv;
    size_t i;
    json_t *v;
    switch (s->kind) {
    case S_PREPARE:
        break; /* started with the build */
    case S_SCRIPT:
    case S_CHECK:
        break; /* an operator build's steps: never in a custom build */
    case S_BOOT: {
        struct sandbox *sb;
        struct sbx_err err = {0};
        if (manager_create_build(tb->b->mgr, r->from, tb->rootfs, &tb->b->egress,
                                 TEMPLATE_BUILD_TTL_S, on_booted, tb, &sb, &err) < 0) {
            fail(tb, err.code[0] ? err.code : "template_build_failed", err.msg, NULL);
            return;
        }
        snprintf(tb->sandbox_id, sizeof(tb->sandbox_id), "%s", sb->rec.id);
        break;
    }
    case S_APT:
        argv = sh(TEMPLATE_APT_SCRIPT);
        json_array_extend(argv, r->apt);
        run_cmd(tb, argv, TEMPLATE_STEP_TIMEOUT_S);
        break;
    case S_NPM:
        argv = json_pack("[s,s,s,s]", "/bin/sh", "-c", TEMPLATE_NPM_SCRIPT,
                         tb->b->cfg->template_npm_registry);
        json_array_extend(argv, r->npm);
        run_cmd(tb, argv, TEMPLATE_STEP_TIMEOUT_S);
        break;
    case S_FILES:
        argv = sh(TEMPLATE_FILES_SCRIPT);
        json_array_foreach(r->files, i, v)
        {
            char name[32], mode[32];
            snprintf(name, sizeof(name), "f%zu", i);
            snprintf(mode, sizeof(mode), "%llo",
                     (unsigned long long)json_integer_value(json_object_get(v, "mode")));
            json_array_append_new(argv, json_string(name));
            json_array_append_new(argv, json_string(mode));
            json_array_append(argv, json_object_get(v, "path"));
        }
        run_cmd(tb, argv, TEMPLATE_STEP_TIMEOUT_S);
        break;
    case S_RUN:
        run_cmd(tb, json_pack("[s,s,O]", "/bin/sh", "-c", json_array_get(r->run, s->run_index)),
                TEMPLATE_STEP_TIMEOUT_S);
        break;
    case S_READY: {
        char tries[16];
        snprintf(tries, sizeof(tries), "%d", TEMPLATE_READY_TIMEOUT_S * 5);
        run_cmd(tb,
                json_pack("[s,s,s,s,s,s,s,s,s]", "/bin/sh", "-c", TEMPLATE_READY_SCRIPT, "sh",
                          r->start_command ? r->start_command : "",
                          r->ready_check ? r->ready_check : "", r->from, tries, r->name),
                TEMPLATE_READY_TIMEOUT_S + 30);
        break;
    }
    case S_FINISH:
        run_cmd(tb, sh(TEMPLATE_FINISH_SCRIPT), TEMPLATE_STEP_TIMEOUT_S);
        break;
    case S_SEAL:
        seal(tb);
        break;
    }
}

/* The build's inputs, written by the daemon into the build sandbox's own (fresh)
 * workspace before any step of the recipe runs. */
/* One input file in the inputs dir, never through a link: the sandbox runs by now (a
 * parent's start command may too) and shares the workspace. */
static int write_input(int dfd, const char *name, const char *buf, size_t len, struct sbx_err *err)
{
    _cleanup_close_ int fd =
        openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return sbx_err_sys(err, errno, "creating the build input %s", name);
    int r = sbx_write_all(fd, buf, len);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing the build input %s", name);
    return 0;
}

static int write_inputs(struct template_build *tb, struct sandbox *sb, struct sbx_err *err)
{
    _cleanup_close_ int ws = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws < 0 || mkdirat(ws, ".sbx-build", 0755) < 0)
        return sbx_err_sys(err, errno, "creating the build inputs");
    _cleanup_close_ int dfd =
        openat(ws, ".sbx-build", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sbx_err_sys(err, errno, "opening the build inputs");
    int r;
    const char *sources = tb->b->cfg->template_apt_sources;
    if (sources) {
        /* SBX_TEMPLATE_APT_SOURCES holds lines separated by ';'. */
        _cleanup_free_ char *body = sbx_xasprintf("%s\n", sources);
        for (char *p = body; *p; p++)
            if (*p == ';')
                *p = '\n';
        if ((r = write_input(dfd, "sources.list", body, strlen(body), err)) < 0)
            return r;
    }
    size_t i;
    json_t *v;
    json_array_foreach(tb->inputs, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        const char *path = json_string_value(json_object_get(v, "path"));
        _cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int out =
            openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (in < 0 || out < 0)
            return sbx_err_sys(err, errno, "copying the build input %s", name);
        if ((r = sbx_copy_sparse(in, out)) < 0)
            return sbx_err_sys(err, -r, "copying the build input %s", name);
    }
    json_array_foreach(tb->recipe.files, i, v)
    {
        char name[32];
        snprintf(name, sizeof(name), "f%zu", i);
        json_t *c = json_object_get(v, "content");
        if ((r = write_input(dfd, name, json_string_value(c), json_string_length(c), err)) < 0)
            return r;
    }
    return 0;
}

static void on_booted(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct template_build *tb = data;
    if (err) {
        fail(tb, "template_build_failed", err->msg, NULL);
        return;
    }
    struct sbx_err e = {0};
    if (write_inputs(tb, sb, &e) < 0) {
        fail(tb, "template_build_failed", e.msg, NULL);
        return;
    }
    tb->cur++;
    next_step(tb);
}

/* --- prepare and seal (worker threads) -------------------------------------------------- */

static const char *parent_rootfs(const struct template_build *tb)
{
    return json_string_value(json_object_get(tb->parent, "sbx_rootfs"));
}

static void prepare_run(void *data)
{
    struct template_build *tb = data;
    tb->job_r = tree_overlay_mount(parent_rootfs(tb), tb->tmp, tb->why);
}

static void prepare_done(void *data, bool ran)
{
    struct template_build *tb = data;
    if (!ran) { /* the daemon stops: template_builds_free frees it */
        tb->status = TB_FAILED;
        return;
    }
    if (tb->job_r < 0) {
        char msg[TREE_ERR_MAX + 64];
        snprintf(msg, sizeof(msg), "preparing a writable %s: %s", tb->recipe.from, tb->why);
        fail(tb, "template_build_failed", msg, NULL);
        return;
    }
    tb->cur++;
    next_step(tb);
}

struct seal_job {
    struct template_build *tb;
    char digest[65];
    long long bytes, entries;
};

static json_t *merged_npm(struct template_build *tb)
{
    return json_incref(tb->npm_list && json_array_size(tb->npm_list)
                           ? tb->npm_list
                           : json_object_get(tb->parent, "npm"));
}

static json_t *recipe_record(const struct recipe *r)
{
    json_t *doc = json_deep_copy(r->doc);
    size_t i;
    json_t *f;
    /* A file's content stays in the tree; the manifest says which and how big. */
    json_array_foreach(json_object_get(doc, "files"), i, f)
    {
        json_t *c = json_object_get(f, "content");
        json_object_set_new(f, "bytes", json_integer((json_int_t)json_string_length(c)));
        json_object_del(f, "content");
    }
    return doc;
}

static void seal_run(void *data)
{
    struct seal_job *j = data;
    struct template_build *tb = j->tb;
    const struct sbxd_config *cfg = tb->b->cfg;
    _cleanup_free_ char *tree = sbx_xasprintf("%s/rootfs", tb->tmp);
    static const char *const scratch[] = {"upper", "work", "mnt"};
    tb->job_r = tree_overlay_unmount(tb->tmp, 30000, tb->why);
    if (tb->job_r == 0)
        tb->job_r = tree_merge(parent_rootfs(tb), tb->tmp, tree, tb->why);
    for (size_t i = 0; tb->job_r == 0 && i < SBX_ARRAY_SIZE(scratch); i++) {
        _cleanup_free_ char *p = sbx_xasprintf("%s/%s", tb->tmp, scratch[i]);
        tb->job_r = tree_remove(p, tb->why);
    }
    if (tb->job_r == 0)
        tb->job_r = tree_digest(tree, j->digest, &j->bytes, &j->entries, tb->why);
    if (tb->job_r < 0)
        return;
    json_t *npm = merged_npm(tb);
    json_t *m = json_pack(
        "{s:s,s:s,s:s,s:I,s:O,s:o,s:I,s:I,s:s,s:O?,s:o?,s:s,s:b,s:b,s:o,s:I}", "name", tb->name,
        "recipe_digest", tb->digest, "content_digest", j->digest, "created_at",
        (json_int_t)(sbx_wall_ms() / 1000), "packages", tb->recipe.apt, "installed",
        tb->installed ? json_incref(tb->installed) : json_array(), "entries",
        (json_int_t)j->entries, "bytes", (json_int_t)j->bytes, "from", tb->recipe.from, "node",
        json_object_get(tb->parent, "node"), "npm", npm, "owner", tb->owner, "shared", tb->shared,
        "custom", 1, "recipe", recipe_record(&tb->recipe), "parent_bytes",
        (json_int_t)json_integer_value(json_object_get(tb->parent, "bytes")));
    if (!m) {
        tb->job_r = -ENOMEM;
        snprintf(tb->why, sizeof(tb->why), "building the manifest");
        return;
    }
    json_object_set_new(m, "from_digest", json_string(tb->from_digest));
    _cleanup_free_ char *text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
    _cleanup_free_ char *mpath = sbx_xasprintf("%s/manifest.json", tb->tmp);
    int r = sbx_write_file_atomic(mpath, text, strlen(text), 0644);
    _cleanup_free_ char *final =
        sbx_xasprintf("%s/%s-%s", cfg->template_cache, tb->name, tb->digest);
    /* A same-digest dir without a manifest is a leftover: never trust it. */
    if (r == 0 && access(final, F_OK) == 0 && tree_remove(final, tb->why) < 0)
        r = -EIO;
    if (r == 0 && (chmod(tb->tmp, 0755) < 0 || rename(tb->tmp, final) < 0))
        r = -errno;
    if (r == 0) {
        _cleanup_free_ char *tmplink =
            sbx_xasprintf("%s/.%s.link.%ld", cfg->template_cache, tb->name, (long)getpid());
        _cleanup_free_ char *link = sbx_xasprintf("%s/%s", cfg->template_cache, tb->name);
        _cleanup_free_ char *target = sbx_xasprintf("%s-%s", tb->name, tb->digest);
        (void)unlink(tmplink);
        if (symlink(target, tmplink) < 0 || rename(tmplink, link) < 0)
            r = -errno;
    }
    if (r < 0) {
        tb->job_r = r;
        if (!tb->why[0])
            snprintf(tb->why, sizeof(tb->why), "publishing: %s", strerror(-r));
        json_decref(m);
        return;
    }
    free(tb->tmp);
    tb->tmp = NULL;
    tb->manifest = m;
}

static void seal_done(void *data, bool ran)
{
    struct seal_job *j = data;
    struct template_build *tb = j->tb;
    free(j);
    if (!ran) {
        tb->status = TB_FAILED;
        return;
    }
    if (tb->job_r < 0) {
        fail(tb, "template_build_failed", tb->why, NULL);
        return;
    }
    tb->status = TB_READY;
    tb->finished_at = sbx_wall_ms() / 1000;
    tb->cur = tb->nsteps;
    log_info("template build %s: %s ready for %s (%lld bytes, %lld s)", tb->id, tb->name, tb->owner,
             (long long)json_integer_value(json_object_get(tb->manifest, "bytes")),
             tb->finished_at - tb->started_at);
    build_emit(tb, json_pack("{s:s,s:s,s:i,s:I,s:o}", "type", "done", "status", "ready", "percent",
                             100, "elapsed_ms", (json_int_t)(sbx_now_ms() - tb->t0_ms), "build",
                             template_build_json(tb)));
    build_end_watchers(tb);
}

static void seal(struct template_build *tb)
{
    /* Nothing runs in the tree any more: its sandbox goes before it is hashed. */
    stop_sandbox(tb);
    struct seal_job *j = sbx_xcalloc(1, sizeof(*j));
    j->tb = tb;
    tb->why[0] = '\0';
    jobs_submit(tb->b->jobs, seal_run, seal_done, j);
}

/* --- starting --------------------------------------------------------------------------- */

static void add_step(struct template_build *tb, int kind, const char *label, size_t run_index)
{
    struct step *s = &tb->steps[tb->nsteps++];
    s->kind = kind;
    s->run_index = run_index;
    snprintf(s->label, sizeof(s->label), "%s", label);
}

static void plan(struct template_build *tb)
{
    const struct recipe *r = &tb->recipe;
    add_step(tb, S_PREPARE, "prepare", 0);
    add_step(tb, S_BOOT, "boot", 0);
    if (json_array_size(r->apt))
        add_step(tb, S_APT, "apt", 0);
    if (json_array_size(r->npm))
        add_step(tb, S_NPM, "npm", 0);
    if (json_array_size(r->files))
        add_step(tb, S_FILES, "files", 0);
    size_t n = json_array_size(r->run);
    for (size_t i = 0; i < n; i++) {
        char label[48];
        snprintf(label, sizeof(label), "run %zu/%zu", i + 1, n);
        add_step(tb, S_RUN, label, i);
    }
    if (r->start_command || r->ready_check)
        add_step(tb, S_READY, "ready", 0);
    add_step(tb, S_FINISH, "finish", 0);
    add_step(tb, S_SEAL, "seal", 0);
}

/* The custom templates of user in the cache (for TEMPLATES_PER_USER_MAX). */
static size_t owned_by(const char *cache, const char *user, const char *except)
{
    size_t n = 0;
    DIR *d = opendir(cache);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_type != DT_LNK || !template_name_valid(de->d_name) || !strcmp(de->d_name, except))
            continue;
        json_t *m;
        struct sbx_err err = {0};
        if (template_load(cache, de->d_name, &m, NULL, &err) == 0) {
            const char *o = json_string_value(json_object_get(m, "owner"));
            n += o && !strcmp(o, user);
            json_decref(m);
        }
    }
    if (d)
        closedir(d);
    return n;
}

/* The finished record a cached recipe answers with. */
static struct template_build *cached_record(struct template_builds *b, struct template_build *tb,
                                            json_t *manifest)
{
    tb->status = TB_READY;
    tb->started_at = json_integer_value(json_object_get(manifest, "created_at"));
    tb->finished_at = tb->started_at;
    tb->manifest = manifest;
    plan(tb);
    tb->cur = tb->nsteps;
    build_emit(tb, json_pack("{s:s,s:s,s:b,s:i,s:o}", "type", "done", "status", "ready", "cached",
                             1, "percent", 100, "build", template_build_json(tb)));
    template_build_forget(b, tb->name);
    build_remember(b, tb);
    return tb;
}

int template_build_start(struct template_builds *b, const struct auth_identity *who, json_t *body,
                         struct template_build **out, bool *cached, struct sbx_err *err)
{
    return template_build_start_with(b, who, body, NULL, out, cached, err);
}

int template_build_start_with(struct template_builds *b, const struct auth_identity *who,
                              json_t *body, json_t *inputs, struct template_build **out,
                              bool *cached, struct sbx_err *err)
{
    const char *cache = b->cfg->template_cache;
    *cached = false;
    _cleanup_free_ char *pdir = NULL, *final = NULL, *fmanifest = NULL, *ftext = NULL, *tmpl = NULL;
    struct template_build *tb = sbx_xcalloc(1, sizeof(*tb));
    tb->b = b;
    tb->events = json_array();
    tb->inputs = json_incref(inputs);
    int r = recipe_parse(body, &tb->recipe, err);
    if (r < 0)
        goto fail;
    const struct recipe *rc = &tb->recipe;
    bool admin = who->role == AUTH_ROLE_ADMIN;
    if (rc->public_ && !admin) {
        r = sbx_err_set(err, EPERM, "admin_required",
                        "only an admin's template is public (visible to every user)");
        goto fail;
    }
    tb->shared = admin && (!rc->public_given || rc->public_);
    snprintf(tb->name, sizeof(tb->name), "%s", rc->name);
    snprintf(tb->owner, sizeof(tb->owner), "%s", who->user);

    struct sbx_err lerr = {0};
    if (template_load(cache, rc->from, &tb->parent, &pdir, &lerr) < 0 ||
        !template_visible(tb->parent, who->user)) {
        r = sbx_err_set(err, EINVAL, "invalid_recipe", "from: no template named %s here", rc->from);
        goto fail;
    }
    json_object_set_new(tb->parent, "sbx_rootfs", json_sprintf("%s/rootfs", pdir));
    snprintf(tb->from_digest, sizeof(tb->from_digest), "%s",
             json_string_value(json_object_get(tb->parent, "content_digest")));

    json_t *existing = NULL;
    (void)template_load(cache, rc->name, &existing, NULL, &lerr);
    {
        _cleanup_free_ char *link = sbx_xasprintf("%s/%s", cache, rc->name);
        struct stat st;
        bool taken = lstat(link, &st) == 0;
        const char *owner = existing ? json_string_value(json_object_get(existing, "owner")) : NULL;
        if (taken && (!owner || strcmp(owner, who->user))) {
            json_decref(existing);
            r = sbx_err_set(err, EEXIST, "template_exists",
                            "the template name %s is taken: choose another", rc->name);
            goto fail;
        }
        json_decref(existing);
    }
    recipe_digest(rc, tb->from_digest, b->cfg->template_apt_sources, b->cfg->template_npm_registry,
                  tb->digest);

    struct template_build *cur = build_by_name(b, rc->name);
    if (cur && cur->status == TB_BUILDING) {
        if (!strcmp(cur->digest, tb->digest) && !strcmp(cur->owner, tb->owner)) {
            build_free(tb);
            *out = cur; /* the same recipe: follow the build under way */
            return 0;
        }
        r = sbx_err_set(err, EBUSY, "template_building",
                        "another recipe of %s is being built (%s): wait for it to end", rc->name,
                        cur->id);
        goto fail;
    }

    /* Built already: the same recipe is never built twice. */
    final = sbx_xasprintf("%s/%s-%s", cache, rc->name, tb->digest);
    fmanifest = sbx_xasprintf("%s/manifest.json", final);
    if (sbx_read_file(fmanifest, 1 << 20, &ftext, NULL) == 0) {
        json_t *m = json_loads(ftext, 0, NULL);
        const char *owner = json_string_value(json_object_get(m, "owner"));
        if (m && owner && !strcmp(owner, who->user)) {
            _cleanup_free_ char *link = sbx_xasprintf("%s/%s", cache, rc->name);
            _cleanup_free_ char *tmplink =
                sbx_xasprintf("%s/.%s.link.%ld", cache, rc->name, (long)getpid());
            _cleanup_free_ char *target = sbx_xasprintf("%s-%s", rc->name, tb->digest);
            (void)unlink(tmplink);
            if (symlink(target, tmplink) < 0 || rename(tmplink, link) < 0) {
                json_decref(m);
                r = sbx_err_sys(err, errno, "pointing %s at its build", rc->name);
                goto fail;
            }
            sbx_random_id("tb_", 10, tb->id, sizeof(tb->id));
            *cached = true;
            *out = cached_record(b, tb, m);
            return 0;
        }
        json_decref(m);
    }

    if (build_running(b) >= (size_t)b->cfg->template_builds_max) {
        r = sbx_err_set(err, EAGAIN, "template_build_limit",
                        "at most %lld template builds run at once here (SBX_TEMPLATE_BUILDS_MAX): "
                        "retry later",
                        b->cfg->template_builds_max);
        goto fail;
    }
    if (owned_by(cache, who->user, rc->name) >= TEMPLATES_PER_USER_MAX) {
        r = sbx_err_set(err, EAGAIN, "template_limit",
                        "at most %d custom templates per user (TEMPLATES_PER_USER_MAX): delete "
                        "one first",
                        TEMPLATES_PER_USER_MAX);
        goto fail;
    }

    tmpl = sbx_xasprintf("%s/.build-%s-%.16s.XXXXXX", cache, rc->name, tb->digest);
    if (!mkdtemp(tmpl)) {
        r = sbx_err_sys(err, errno, "creating the build directory in %s", cache);
        goto fail;
    }
    tb->tmp = sbx_xstrdup(tmpl);
    tb->rootfs = sbx_xasprintf("%s/mnt", tb->tmp); /* the build's writable view */
    sbx_random_id("tb_", 10, tb->id, sizeof(tb->id));
    tb->started_at = sbx_wall_ms() / 1000;
    tb->t0_ms = sbx_now_ms();
    plan(tb);
    template_build_forget(b, tb->name);
    build_remember(b, tb);
    log_info("template build %s: %s from %s for %s (recipe %.16s, %zu steps)", tb->id, tb->name,
             rc->from, tb->owner, tb->digest, tb->nsteps);
    next_step(tb); /* the copy's step event */
    jobs_submit(b->jobs, prepare_run, prepare_done, tb);
    *out = tb;
    return 0;

fail:
    build_free(tb);
    return r < 0 ? r : -EINVAL;
}

static void drop_leftover(struct sandbox *sb, void *data)
{
    struct template_builds *b = data;
    struct sbx_err err = {0};
    if (sandbox_is_build(sb) && !sb->ended &&
        manager_destroy(b->mgr, sb, "template_build", &err) < 0)
        log_error("template builds: stopping %s: %s", sb->rec.id, err.msg);
}

int template_builds_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                        struct jobs *j, struct template_builds **out, struct sbx_err *err)
{
    struct template_builds *b = sbx_xcalloc(1, sizeof(*b));
    b->cfg = cfg;
    b->loop = l;
    b->mgr = m;
    b->jobs = j;
    json_t *domains = json_array();
    _cleanup_free_ char *list = sbx_xstrdup(cfg->template_registries);
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(domains, json_string(t));
    json_t *policy = json_pack("{s:s,s:o}", "mode", "allowlist", "domains", domains);
    int r = egress_policy_parse(policy, &b->egress, err);
    json_decref(policy);
    if (r < 0) {
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        sbx_err_set(err, EINVAL, "invalid_config", "SBX_TEMPLATE_REGISTRIES: %s", why);
        free(b);
        return r;
    }
    /* Builds do not survive a restart: their sandboxes and half-made trees go. */
    manager_each(m, "", drop_leftover, b);
    DIR *d = opendir(cfg->template_cache);
    for (struct dirent *de; d && (de = readdir(d));)
        if (!strncmp(de->d_name, ".build-", 7)) {
            _cleanup_free_ char *p = sbx_xasprintf("%s/%s", cfg->template_cache, de->d_name);
            build_remove_later(b, p);
        }
    if (d)
        closedir(d);
    *out = b;
    return 0;
}

void template_builds_free(struct template_builds *b)
{
    if (!b)
        return;
    while (b->list) {
        struct template_build *tb = b->list;
        b->list = tb->next;
        build_end_watchers(tb);
        if (tb->run)
            exec_abandon(tb->run);
        if (tb->op)
            operator_run_abandon(tb->op);
        build_free(tb);
    }
    free(b);
}
