/* Import circle with install_run.c (allowed inside a folder,
 * docs/architecture.md#layering): installs.c keeps the configurations' installs and starts
 * rounds (install_run.c); a round, when it ends, places the bundle and rolls it out through
 * installs.c (installs_place, installs_rollout). Both are the skills folder's; nothing
 * outside sees the loop. */
#include "installs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/jsonfind.h"
#include "../../common/log.h"
#include "../../common/sbxuser.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../configs/configs.h"
#include "../sandbox/params.h"
#include "../sbxd.h"
#include "catalog.h"
#include "install_run.h"

static int config_exists(struct installs *ins, const char *config_id, struct sbx_err *err)
{
    struct store_config c = {0};
    int r = store_config_get(ins->d->store, config_id, &c, err);
    store_config_clear(&c);
    return r;
}

/* An install writes the skills into workspaces on this host (install_run.c, fill_skills): a
 * configuration whose sandboxes keep /workspace elsewhere cannot take one (docs/skills.md). */
static int config_takes_skills(struct installs *ins, const char *config_id, struct sbx_err *err)
{
    struct store_config c = {0};
    int r = store_config_get(ins->d->store, config_id, &c, err);
    json_t *doc = r == 0 ? json_loads(c.config_json, 0, NULL) : NULL;
    if (r == 0 && config_doc_workspace_remote(doc))
        r = sbx_err_set(err, ENOTSUP, "not_supported_on_provider",
                        "configuration %s keeps its sandboxes' /workspace at a provider or a "
                        "remote docker engine: skills cannot be installed into it",
                        config_id);
    json_decref(doc);
    store_config_clear(&c);
    return r;
}

/* --- what sandboxes of a configuration get ------------------------------------------- */

/* What sbx writes into a workspace belongs to the user commands run as (docs/security.md),
 * who may then change or remove its copy; a daemon that is not root cannot give it away. */
static int own(int fd)
{
    if (fd >= 0)
        (void)fchown(fd, SBX_USER_UID, SBX_USER_GID);
    return fd;
}

/* in to out by read and write: the workspace is another filesystem (a loop-mounted image),
 * where copy_file_range does not reach. */
static int copy_fd(int in, int out)
{
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n == 0)
            return 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        int r = sbx_write_all(out, buf, (size_t)n);
        if (r < 0)
            return r;
    }
}

/* over: dst's entry name may exist; make room for src's of that type. A directory stays
 * (its other entries with it), anything else goes (a link is removed, never followed). */
static int make_room(int dst, const char *name, bool dir)
{
    struct stat st;
    if (fstatat(dst, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (dir && S_ISDIR(st.st_mode))
        return 0;
    return sbx_rm_rf_at(dst, name);
}

/* A bundle's tree (regular files and directories only: bundle.c refuses the rest) into a
 * directory of a workspace that a running sandbox may be changing meanwhile: every step is
 * relative to a directory fd, never follows a link and never reuses an entry, so nothing it
 * writes lands outside the workspace. over: dst may hold a tree already; the bundle's
 * files replace theirs, its other entries stay (what an install script left there). */
static int copy_tree_at(int src, int dst, int depth, bool over, struct sbx_err *err)
{
    if (depth > INSTALL_TREE_DEPTH_MAX)
        return sbx_err_set(err, ELOOP, "internal", "a skill's tree is deeper than %d",
                           INSTALL_TREE_DEPTH_MAX);
    int dup_fd = dup(src);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return sbx_err_sys(err, errno, "reading a skill's folder");
    }
    rewinddir(d);
    int r = 0;
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = sbx_err_sys(err, errno, "reading %s", de->d_name);
            break;
        }
        int room = over ? make_room(dst, de->d_name, S_ISDIR(st.st_mode)) : 0;
        if (room < 0) {
            r = sbx_err_sys(err, -room, "replacing %s", de->d_name);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            int in = openat(src, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int out = -1;
            if (in >= 0 && (mkdirat(dst, de->d_name, 0755) == 0 || (over && errno == EEXIST)))
                out = own(openat(dst, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            r = out < 0 ? sbx_err_sys(err, errno, "copying %s", de->d_name)
                        : copy_tree_at(in, out, depth + 1, over, err);
            if (in >= 0)
                close(in);
            if (out >= 0)
                close(out);
        } else if (S_ISREG(st.st_mode)) {
            int in = openat(src, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            int out = in < 0 ? -1
                             : own(openat(dst, de->d_name,
                                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                          st.st_mode & 0755));
            int c = out < 0 ? -errno : copy_fd(in, out);
            if (c < 0)
                r = sbx_err_sys(err, -c, "copying %s", de->d_name);
            if (in >= 0)
                close(in);
            if (out >= 0)
                close(out);
        }
    }
    closedir(d);
    return r;
}

/* Brings /workspace/skills to every enabled install's served bundle: a folder of another
 * name goes (a disabled or deleted install, or not what sbx put there); in an enabled
 * install's folder the bundle's files are written again and the rest stays, which is what
 * its install script left beside SKILL.md: the configuration's snapshot holds it, and new
 * sandboxes, forks and restores keep it. */
static int fill_skills(void *data, const char *workspace, struct sbx_err *err)
{
    json_t *list = data;
    _cleanup_close_ int root = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0)
        return sbx_err_sys(err, errno, "opening the workspace");
    (void)sbx_rm_rf_at(root, INSTALL_CTL_DIR);
    int r = make_room(root, INSTALL_SKILLS_DIR, true);
    if (r < 0)
        return sbx_err_sys(err, -r, "clearing /workspace/skills");
    if (!json_array_size(list)) {
        r = sbx_rm_rf_at(root, INSTALL_SKILLS_DIR);
        return r < 0 ? sbx_err_sys(err, -r, "clearing /workspace/skills") : 0;
    }
    _cleanup_close_ int skills = -1;
    if ((mkdirat(root, INSTALL_SKILLS_DIR, 0755) < 0 && errno != EEXIST) ||
        (skills = own(openat(root, INSTALL_SKILLS_DIR,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))) < 0)
        return sbx_err_sys(err, errno, "creating /workspace/skills");
    /* Names no enabled install has. */
    int dup_fd = dup(skills);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return sbx_err_sys(err, errno, "reading /workspace/skills");
    }
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            !sbx_json_find(list, "name", de->d_name) && (r = sbx_rm_rf_at(skills, de->d_name)) < 0)
            sbx_err_sys(err, -r, "clearing /workspace/skills/%s", de->d_name);
    }
    closedir(d);
    if (r < 0)
        return r;
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *bundle = json_string_value(json_object_get(s, "dir"));
        _cleanup_close_ int src = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int dst = -1;
        if (src < 0)
            return sbx_err_sys(err, errno, "opening the bundle of %s", name);
        if ((r = make_room(skills, name, true)) < 0)
            return sbx_err_sys(err, -r, "replacing /workspace/skills/%s", name);
        if ((mkdirat(skills, name, 0755) < 0 && errno != EEXIST) ||
            (dst = own(openat(skills, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))) < 0)
            return sbx_err_sys(err, errno, "making /workspace/skills/%s", name);
        if ((r = copy_tree_at(src, dst, 0, true, err)) < 0)
            return r;
    }
    return 0;
}

int installs_place(const char *bundle, int skills_dir, const char *name, struct sbx_err *err)
{
    _cleanup_close_ int src = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int dst = -1;
    int r = sbx_rm_rf_at(skills_dir, name);
    if (r < 0)
        return sbx_err_sys(err, -r, "replacing /workspace/skills/%s", name);
    if (src < 0 || mkdirat(skills_dir, name, 0755) < 0 ||
        (dst = own(openat(skills_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))) < 0)
        return sbx_err_sys(err, errno, "making /workspace/skills/%s", name);
    return copy_tree_at(src, dst, 0, false, err);
}

struct served {
    struct installs *ins;
    json_t *list;
};

static void add_served(const struct store_skill_install *i, void *data)
{
    struct served *s = data;
    if (!i->enabled || !i->served_catalog_id[0])
        return;
    char *dir = skills_path(s->ins->d->skills, i->served_catalog_id);
    json_array_append_new(s->list,
                          json_pack("{s:s,s:s%}", "name", i->name, "dir", dir, strlen(dir)));
    free(dir);
}

/* [{name, dir}] of the configuration's enabled installs' served bundles. */
static int served_list(struct installs *ins, const char *config_id, json_t **out,
                       struct sbx_err *err)
{
    struct served s = {.ins = ins, .list = json_array()};
    int r = store_skill_install_each(ins->d->store, config_id, NULL, add_served, &s, err);
    if (r < 0) {
        json_decref(s.list);
        return r;
    }
    *out = s.list;
    return 0;
}

static int config_hook(void *data, const char *config_id, struct sandbox_params *p, json_t *hold,
                       struct sbx_err *err)
{
    struct installs *ins = data;
    char snap[STORE_ID_MAX + 1];
    struct served s = {.ins = ins};
    int r = store_skill_config_snapshot_get(ins->d->store, config_id, snap, err);
    if (r == 0)
        r = served_list(ins, config_id, &s.list, err);
    if (r < 0)
        return r;
    char *from = snap[0] ? install_snapshot_path(ins, snap) : NULL;
    if (from) {
        json_object_set_new(hold, "skills_from", json_string(from));
        p->workspace_from = json_string_value(json_object_get(hold, "skills_from"));
        free(from);
    }
    json_object_set_new(hold, "skills", s.list);
    p->workspace_fill = fill_skills;
    p->workspace_fill_data = s.list;
    return 0;
}

struct stale_ctx {
    struct installs *ins;
    const char *config_id;
    json_t *next;
};

static void mark_stale(struct sandbox *sb, void *data)
{
    struct stale_ctx *c = data;
    if (json_object_get(c->ins->stale, sb->rec.id) ||
        (!strcmp(sb->config_id, c->config_id) && !install_run_owns_sandbox(c->ins, sb->rec.id)))
        json_object_set_new(c->next, sb->rec.id, json_true());
}

void installs_rollout(struct installs *ins, const char *config_id)
{
    struct store_config cfg = {0};
    if (store_config_get(ins->d->store, config_id, &cfg, NULL) < 0)
        return;
    json_t *doc = json_loads(cfg.config_json, 0, NULL);
    bool later =
        !strcmp(json_string_value(json_object_get(doc, "skill_rollout")) ?: "", "new_session");
    json_decref(doc);
    store_config_clear(&cfg);
    if (later)
        return;
    /* Rebuilt from the live sandboxes, so ended ones drop out. */
    struct stale_ctx c = {.ins = ins, .config_id = config_id, .next = json_object()};
    manager_each(ins->d->mgr, NULL, mark_stale, &c);
    json_decref(ins->stale);
    ins->stale = c.next;
}

static void exec_hook(void *data, struct sandbox *sb)
{
    struct installs *ins = data;
    if (!json_object_get(ins->stale, sb->rec.id))
        return;
    json_object_del(ins->stale, sb->rec.id);
    json_t *list = NULL;
    struct sbx_err err = {0};
    if (served_list(ins, sb->config_id, &list, &err) < 0 ||
        fill_skills(list, sb->workspace, &err) < 0)
        log_warn("sandbox %s: bringing its skills up to date: %s", sb->rec.id, err.msg);
    json_decref(list);
}

/* A configuration is being deleted: its snapshot is released by moving it aside in one
 * rename (so a refusal leaves it whole), to be removed once the store forgot it. */
static int snapshot_park(void *data, const char *config_id, char **from, char **parked,
                         struct sbx_err *err)
{
    struct installs *ins = data;
    char snap[STORE_ID_MAX + 1];
    *from = *parked = NULL;
    int r = store_skill_config_snapshot_get(ins->d->store, config_id, snap, err);
    if (r < 0 || !snap[0])
        return r;
    _cleanup_free_ char *dir = sbx_xasprintf("%s/snapshots/%s", ins->dir, snap);
    _cleanup_free_ char *aside =
        sbx_xasprintf("%s/snapshots/" INSTALL_RELEASED_PREFIX "%s", ins->dir, snap);
    if (rename(dir, aside) < 0) {
        if (errno == ENOENT)
            return 0; /* nothing on disk to release */
        return sbx_err_set(err, errno, "skill_snapshot_release_failed",
                           "the skill snapshot %s of configuration %s cannot be released (%s): "
                           "the configuration is kept",
                           snap, config_id, strerror(errno));
    }
    *from = dir;
    *parked = aside;
    dir = aside = NULL;
    return 0;
}

static void destroy_leftover(struct sandbox *sb, void *data)
{
    struct sbx_err err = {0};
    if (manager_destroy(sb->mgr, sb, "skill_install_interrupted", &err) < 0)
        log_warn("sandbox %s: %s", sb->rec.id, err.msg);
}

int installs_new(struct sbxd *d, struct installs **out, struct sbx_err *err)
{
    struct installs *ins = sbx_xcalloc(1, sizeof(*ins));
    ins->d = d;
    ins->dir = sbx_xasprintf("%s/skill-installs", d->cfg.data_dir);
    _cleanup_free_ char *snaps = sbx_xasprintf("%s/snapshots", ins->dir);
    int r = sbx_mkdir_p(snaps, 0700);
    if (r < 0) {
        sbx_err_sys(err, -r, "creating %s", snaps);
        installs_free(ins);
        return r;
    }
    if ((r = store_skill_install_interrupt(d->store, sbx_wall_ms() / 1000, err)) < 0) {
        installs_free(ins);
        return r;
    }
    /* What a previous daemon left: snapshots nothing names, rounds' sandboxes. */
    DIR *dir = opendir(snaps);
    for (struct dirent *de; dir && (de = readdir(dir));) {
        if (!strncmp(de->d_name, INSTALL_RELEASED_PREFIX, strlen(INSTALL_RELEASED_PREFIX)))
            (void)sbx_rm_rf_at(dirfd(dir), de->d_name); /* a deleted configuration's */
        else if (de->d_name[0] != '.')
            install_snapshot_gc(ins, de->d_name);
    }
    if (dir)
        closedir(dir);
    manager_each(d->mgr, INSTALL_USER, destroy_leftover, NULL);
    ins->stale = json_object();
    d->configs->skills_fn = config_hook;
    d->configs->snapshot_park_fn = snapshot_park;
    d->configs->skills_data = ins;
    manager_set_exec_hook(d->mgr, exec_hook, ins);
    *out = ins;
    return 0;
}

void installs_free(struct installs *ins)
{
    if (!ins)
        return;
    install_run_free_all(ins);
    json_decref(ins->stale);
    free(ins->dir);
    free(ins);
}

/* --- the install as the API shows it ------------------------------------------------- */

static json_t *install_json(struct installs *ins, const struct store_skill_install *i)
{
    struct store_skill cat = {0};
    (void)store_skill_get(ins->d->store, i->catalog_id, &cat, NULL);
    json_t *decl = json_loads(cat.envs_json ? cat.envs_json : "[]", 0, NULL);
    json_t *vals = json_loads(i->envs_json ? i->envs_json : "{}", 0, NULL);
    json_t *envs = json_array();
    size_t k;
    json_t *e;
    json_array_foreach(decl, k, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_array_append_new(envs, json_pack("{s:s,s:O,s:b,s:b}", "name", name, "description",
                                              json_object_get(e, "description"), "required",
                                              json_is_true(json_object_get(e, "required")),
                                              "is_set", json_object_get(vals, name) != NULL));
    }
    json_decref(decl);
    json_decref(vals);
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:s,s:s?,s:s,s:s?,s:s?,s:s,s:o,s:o,s:I,s:I}", "id", i->id,
        "object", "sandbox_config_skill", "sandbox_config_id", i->config_id, "catalog_id",
        i->catalog_id, "name", i->name, "version", i->version, "description",
        cat.description ? cat.description : "", "enabled", i->enabled, "status", i->status, "error",
        i->error, "bundle_sha256", i->bundle_sha256, "installed_snapshot_id",
        i->snapshot_id[0] ? i->snapshot_id : NULL, "install_session_id",
        i->session_id[0] ? i->session_id : NULL, "install_message_id", i->message_id, "served",
        skills_served_json(i), "envs", envs, "created_at", (json_int_t)i->created_at, "updated_at",
        (json_int_t)i->updated_at);
    store_skill_clear(&cat);
    return j;
}

static int load(struct installs *ins, const char *config_id, const char *id,
                struct store_skill_install *out, struct sbx_err *err)
{
    int r = config_exists(ins, config_id, err);
    return r < 0 ? r : store_skill_install_get(ins->d->store, config_id, id, out, err);
}

/* --- rounds -------------------------------------------------------------------------- */

static int begin_round(struct installs *ins, const struct auth_identity *who,
                       struct store_skill_install *rec, const struct store_skill *cat,
                       const char *instructions, struct sbx_err *err)
{
    snprintf(rec->catalog_id, sizeof(rec->catalog_id), "%s", cat->id);
    snprintf(rec->version, sizeof(rec->version), "%s", cat->version);
    snprintf(rec->bundle_sha256, sizeof(rec->bundle_sha256), "%s", cat->bundle_sha256);
    snprintf(rec->status, sizeof(rec->status), "installing");
    free(rec->error);
    rec->error = NULL;
    rec->session_id[0] = '\0';
    sbx_random_id("msg_", 8, rec->message_id, sizeof(rec->message_id));
    rec->updated_at = sbx_wall_ms() / 1000;
    int r = store_skill_install_put(ins->d->store, rec, err);
    if (r == 0)
        install_run_begin(ins, who, rec, instructions);
    return r;
}

struct by_name {
    const char *name;
    struct store_skill_install found;
    bool have;
};

static void find_name(const struct store_skill_install *i, void *data)
{
    struct by_name *b = data;
    if (b->have || strcmp(i->name, b->name))
        return;
    b->found = *i;
    b->found.error = i->error ? sbx_xstrdup(i->error) : NULL;
    b->found.envs_json = i->envs_json ? sbx_xstrdup(i->envs_json) : NULL;
    b->have = true;
}

int installs_start(struct installs *ins, const struct auth_identity *who, const char *config_id,
                   const char *catalog_id, char skill_id[STORE_ID_MAX + 1], struct sbx_err *err)
{
    struct store_skill cat = {0};
    int r = config_takes_skills(ins, config_id, err);
    if (r == 0)
        r = store_skill_get(ins->d->store, catalog_id, &cat, err);
    struct by_name b = {.name = cat.name};
    if (r == 0)
        r = store_skill_install_each(ins->d->store, config_id, NULL, find_name, &b, err);
    if (r == 0 && b.have && !strcmp(b.found.status, "installing"))
        r = sbx_err_set(err, EBUSY, "skill_install_busy",
                        "configuration %s is installing %s already: stop it or wait", config_id,
                        cat.name);
    if (r == 0 && !b.have) {
        sbx_random_id("sks_", 8, b.found.id, sizeof(b.found.id));
        snprintf(b.found.config_id, sizeof(b.found.config_id), "%s", config_id);
        snprintf(b.found.name, sizeof(b.found.name), "%s", cat.name);
        snprintf(b.found.owner, sizeof(b.found.owner), "%s", who->user);
        b.found.enabled = true;
        b.found.created_at = sbx_wall_ms() / 1000;
    }
    if (r == 0)
        r = begin_round(ins, who, &b.found, &cat, NULL, err);
    if (r == 0)
        snprintf(skill_id, STORE_ID_MAX + 1, "%s", b.found.id);
    store_skill_install_clear(&b.found);
    store_skill_clear(&cat);
    return r;
}

int installs_reinstall(struct installs *ins, const struct auth_identity *who, const char *config_id,
                       const char *skill_id, const char *instructions, struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    struct store_skill cat = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0)
        r = config_takes_skills(ins, config_id, err);
    if (r == 0 && !strcmp(rec.status, "installing"))
        r = sbx_err_set(err, EBUSY, "skill_install_busy",
                        "skill %s is installing already: stop it or wait", skill_id);
    if (r == 0)
        r = store_skill_get(ins->d->store, rec.catalog_id, &cat, err);
    if (r == 0)
        r = begin_round(ins, who, &rec, &cat, instructions, err);
    store_skill_install_clear(&rec);
    store_skill_clear(&cat);
    return r;
}

int installs_stop(struct installs *ins, const struct auth_identity *who, const char *config_id,
                  const char *skill_id, json_t **out, struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0 && strcmp(rec.status, "installing") && strcmp(rec.status, "failed"))
        r = sbx_err_set(err, EBUSY, "skill_not_installing",
                        "skill %s is %s: only an install under way can be stopped", skill_id,
                        rec.status);
    if (r == 0 && !strcmp(rec.status, "installing")) {
        struct install_run *run = install_run_find(ins, skill_id);
        if (install_run_active(run)) {
            install_run_stop(run, who->user);
        } else { /* a round no daemon runs any more */
            snprintf(rec.status, sizeof(rec.status), "failed");
            free(rec.error);
            rec.error = sbx_xasprintf("stopped by %s", who->user);
            r = store_skill_install_put(ins->d->store, &rec, err);
        }
        store_skill_install_clear(&rec);
        if (r == 0)
            r = store_skill_install_get(ins->d->store, config_id, skill_id, &rec, err);
    }
    if (r == 0)
        *out = install_json(ins, &rec);
    store_skill_install_clear(&rec);
    return r;
}

/* --- reading, changing, deleting ------------------------------------------------------ */

struct listing {
    struct installs *ins;
    json_t *list;
    bool agent;
};

static void list_one(const struct store_skill_install *i, void *data)
{
    struct listing *l = data;
    if (!l->agent) {
        json_array_append_new(l->list, install_json(l->ins, i));
        return;
    }
    if (!i->enabled || !i->served_catalog_id[0])
        return;
    /* The agent gets what sandboxes are served, not the round under way. */
    struct store_skill cat = {0};
    if (store_skill_get(l->ins->d->store, i->served_catalog_id, &cat, NULL) == 0)
        json_array_append_new(l->list, json_pack("{s:s,s:s}", "name", i->name, "description",
                                                 cat.description ? cat.description : ""));
    store_skill_clear(&cat);
}

int installs_list(struct installs *ins, const char *config_id, json_t **out, struct sbx_err *err)
{
    struct listing l = {.ins = ins, .list = json_array()};
    int r = config_exists(ins, config_id, err);
    if (r == 0)
        r = store_skill_install_each(ins->d->store, config_id, NULL, list_one, &l, err);
    if (r < 0) {
        json_decref(l.list);
        return r;
    }
    *out = l.list;
    return 0;
}

int installs_agent_list(struct installs *ins, const char *config_id, json_t **out,
                        struct sbx_err *err)
{
    json_t *list = json_array();
    if (!config_id || !*config_id) {
        *out = json_pack("{s:s,s:o,s:b}", "object", "list", "data", list, "skills_available", 0);
        return 0;
    }
    struct listing l = {.ins = ins, .list = list, .agent = true};
    int r = config_exists(ins, config_id, err);
    if (r == 0)
        r = store_skill_install_each(ins->d->store, config_id, NULL, list_one, &l, err);
    if (r < 0) {
        json_decref(list);
        return r;
    }
    *out = json_pack("{s:s,s:o,s:b}", "object", "list", "data", list, "skills_available", 1);
    return 0;
}

int installs_get(struct installs *ins, const char *config_id, const char *skill_id, json_t **out,
                 struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0)
        *out = install_json(ins, &rec);
    store_skill_install_clear(&rec);
    return r;
}

int installs_catalog_id(struct installs *ins, const char *config_id, const char *skill_id,
                        char out[STORE_SKILL_ID_MAX + 1], struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0)
        snprintf(out, STORE_SKILL_ID_MAX + 1, "%s", rec.catalog_id);
    store_skill_install_clear(&rec);
    return r;
}

/* envs: {name: value}; values sealed under the install's id and the name. */
static int patch_envs(struct installs *ins, struct store_skill_install *rec, const json_t *envs,
                      json_t *ignored, struct sbx_err *err)
{
    struct store_skill cat = {0};
    int r = store_skill_get(ins->d->store, rec->catalog_id, &cat, err);
    if (r < 0)
        return r;
    json_t *decl = json_loads(cat.envs_json ? cat.envs_json : "[]", 0, NULL);
    json_t *vals = json_loads(rec->envs_json ? rec->envs_json : "{}", 0, NULL);
    if (!json_is_object(vals)) {
        json_decref(vals);
        vals = json_object();
    }
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)envs, name, v)
    {
        if (!json_is_string(v)) {
            r = sbx_err_set(err, EINVAL, "invalid_env", "envs.%.64s must be a string", name);
            break;
        }
        if (!sbx_json_find(decl, "name", name)) {
            json_array_append_new(ignored, json_string(name));
            continue;
        }
        const char *plain = json_string_value(v);
        if (!*plain) { /* cleared; the declaration stays */
            json_object_del(vals, name);
            continue;
        }
        if (strlen(plain) > SANDBOX_ENV_VALUE_MAX) {
            r = sbx_err_set(err, EINVAL, "invalid_env", "envs.%.64s is at most %d bytes", name,
                            SANDBOX_ENV_VALUE_MAX);
            break;
        }
        _cleanup_free_ char *ctx = configs_skill_env_context(rec->id, name);
        char *sealed = NULL;
        if ((r = secrets_seal(ins->d->configs->secrets, ctx, plain, &sealed, err)) < 0)
            break;
        json_object_set_new(vals, name, json_string(sealed));
        free(sealed);
    }
    if (r == 0) {
        free(rec->envs_json);
        rec->envs_json = json_dumps(vals, JSON_COMPACT | JSON_SORT_KEYS);
    }
    json_decref(vals);
    json_decref(decl);
    store_skill_clear(&cat);
    return r;
}

int installs_patch(struct installs *ins, const char *config_id, const char *skill_id,
                   const json_t *body, json_t **out, json_t **ignored, struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    const json_t *enabled = json_object_get(body, "enabled");
    const json_t *envs = json_object_get(body, "envs");
    int r = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (strcmp(key, "enabled") && strcmp(key, "envs")) {
            r = sbx_err_set(err, EINVAL, "invalid_request",
                            "unknown field %.64s: send enabled and/or envs", key);
            break;
        }
    }
    if (r == 0 && enabled && !json_is_boolean(enabled))
        r = sbx_err_set(err, EINVAL, "invalid_request", "enabled must be true or false");
    if (r == 0 && envs && !json_is_object(envs))
        r = sbx_err_set(err, EINVAL, "invalid_request", "envs must be an object of strings");
    if (r == 0)
        r = load(ins, config_id, skill_id, &rec, err);
    *ignored = json_array();
    if (r == 0 && envs)
        r = patch_envs(ins, &rec, envs, *ignored, err);
    if (r == 0 && enabled)
        rec.enabled = json_is_true(enabled);
    if (r == 0) {
        rec.updated_at = sbx_wall_ms() / 1000;
        r = store_skill_install_put(ins->d->store, &rec, err);
    }
    if (r == 0) {
        *out = install_json(ins, &rec);
        if (enabled)
            installs_rollout(ins, config_id);
    }
    store_skill_install_clear(&rec);
    if (r < 0) {
        json_decref(*ignored);
        *ignored = NULL;
    }
    return r;
}

int installs_delete(struct installs *ins, const char *config_id, const char *skill_id,
                    struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0) {
        install_run_forget(ins, skill_id);
        r = store_skill_install_delete(ins->d->store, skill_id, err);
    }
    if (r == 0) {
        /* Its values go with it; the configuration's other skills keep the snapshot. */
        install_snapshot_gc(ins, rec.snapshot_id);
        installs_rollout(ins, config_id);
        _cleanup_free_ char *t = sbx_xasprintf("%s/transcripts/%s.json", ins->dir, skill_id);
        (void)unlink(t);
    }
    store_skill_install_clear(&rec);
    return r;
}

/* --- guidance and following ---------------------------------------------------------- */

int installs_guidance(struct installs *ins, const char *config_id, const char *skill_id,
                      json_t **out, struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    store_skill_install_clear(&rec);
    if (r == 0)
        *out = install_run_guidance(install_run_find(ins, skill_id));
    return r;
}

int installs_guide(struct installs *ins, const char *config_id, const char *skill_id,
                   const char *expected_message_id, const char *steer_id, const char *content,
                   struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    store_skill_install_clear(&rec);
    if (r < 0)
        return r;
    return install_run_guide(install_run_find(ins, skill_id), expected_message_id, steer_id,
                             content, err);
}

int installs_follow(struct installs *ins, const char *config_id, const char *skill_id,
                    bool transcript, struct http_req *req, struct sbx_err *err)
{
    struct store_skill_install rec = {0};
    int r = load(ins, config_id, skill_id, &rec, err);
    if (r == 0) {
        struct install_run *run = install_run_find(ins, skill_id);
        /* A round this daemon holds only counts when it is the install's current one. */
        r = install_run_follow(ins, run, &rec, transcript, req, err);
    }
    store_skill_install_clear(&rec);
    return r;
}
