/* Start-up: the store and the runtime made to agree. Every live record whose shim still
 * answers is re-attached, every live record whose machine is gone is marked failed
 * (lost) and kept with its workspace when it ever ran, and whatever runs or lies on
 * disk without a live record is removed. */
#include "lifecycle.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "wsimage.h"

/* How long a start waits for a checkpoint a killed daemon left running (a checkpoint of
 * a 2 GB sandbox takes seconds). */
#define SANDBOX_CHECKPOINT_WAIT_MS 60000
/* And for the machine it checkpointed to stop. */
#define SANDBOX_CHECKPOINT_STOP_MS 5000

struct reconcile {
    struct manager *m;
    char **live; /* ids the store says are live */
    size_t n, cap;
};

/* Back among the manager's sandboxes, its TTL running again. */
static void keep(struct manager *m, struct sandbox *sb)
{
    sb->next = m->sandboxes;
    m->sandboxes = sb;
    sandbox_arm_ttl(m, sb);
}

struct sandbox *sandbox_from_record(struct manager *m, const struct store_sandbox *rec)
{
    struct sandbox *sb = sandbox_alloc(m, rec->id);
    sb->rec = *rec;
    sb->rec.env_json = sbx_xstrdup(rec->env_json);
    sandbox_egress_load(m, sb);
    (void)store_meta_get(m->store, rec->id, STORE_META_BOOT_ID, sb->boot_id, sizeof(sb->boot_id),
                         NULL);
    (void)store_meta_get(m->store, rec->id, STORE_META_PARENT, sb->parent_id, sizeof(sb->parent_id),
                         NULL);
    (void)store_meta_get(m->store, rec->id, STORE_META_FALLBACK, sb->fallback, sizeof(sb->fallback),
                         NULL);
    sandbox_config_settings_load(m, sb);
    return sb;
}

void sandbox_keep_paused(struct manager *m, struct sandbox *sb)
{
    char at[24];
    if (store_meta_get(m->store, sb->rec.id, STORE_META_PAUSED_AT, at, sizeof(at), NULL) == 0)
        sb->paused_at = strtoll(at, NULL, 10);
    sb->paused = true;
    keep(m, sb);
}

static void keep_failed(struct manager *m, struct sandbox *sb)
{
    sb->failed = true;
    keep(m, sb);
}

/* A pause or a fork stops the machine while it checkpoints it into <dir>/snapshots
 * ("memory" or "fork-…"); their images are removed once used. So an image there on a
 * sandbox recorded running means sbxd was killed during one. Its runsc checkpoint may
 * still be running and would stop the machine after we re-attached it: wait for it first.
 * *complete: one of the images was written whole. Returns whether one was found. */
static bool checkpoint_in_flight(struct sandbox *sb, bool *complete)
{
    *complete = false;
    _cleanup_free_ char *snaps = sbx_xasprintf("%s/snapshots", sb->dir);
    DIR *d = opendir(snaps);
    if (!d)
        return false;
    bool found = false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, "memory") && strncmp(de->d_name, "fork-", 5))
            continue;
        _cleanup_free_ char *img = sbx_xasprintf("%s/%s", snaps, de->d_name);
        rt_checkpoint_wait(img, SANDBOX_CHECKPOINT_WAIT_MS);
        _cleanup_free_ char *file = sbx_xasprintf("%s/checkpoint.img", img);
        *complete |= access(file, F_OK) == 0;
        found = true;
    }
    closedir(d);
    return found;
}

/* A completed checkpoint stops the machine a moment later, and its shim lives on for its
 * runsc delete: attaching then would find a machine on its way out. */
static bool stopped_by_checkpoint(struct sandbox *sb)
{
    _cleanup_free_ char *status = sbx_xasprintf("%s/exit_status", sb->state_dir);
    long long until = sbx_now_ms() + SANDBOX_CHECKPOINT_STOP_MS;
    while (access(status, F_OK) != 0 && rt_alive(sb->state_dir) && sbx_now_ms() < until)
        usleep(20 * 1000);
    return access(status, F_OK) == 0 || !rt_alive(sb->state_dir);
}

/* The images a killed pause or fork left: kept as the pause image ("memory") when keep,
 * else removed. */
static bool settle_images(struct sandbox *sb, bool keep)
{
    _cleanup_free_ char *snaps = sbx_xasprintf("%s/snapshots", sb->dir);
    _cleanup_free_ char *memory = sbx_xasprintf("%s/memory", snaps);
    bool have = keep && access(memory, F_OK) == 0;
    if (!keep)
        (void)sbx_rm_rf(memory);
    DIR *d = opendir(snaps);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "fork-", 5))
            continue;
        _cleanup_free_ char *img = sbx_xasprintf("%s/%s", snaps, de->d_name);
        if (keep && !have && rename(img, memory) == 0)
            have = true;
        else
            (void)sbx_rm_rf(img);
    }
    if (d)
        closedir(d);
    return have;
}

static void drop_images_when_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    if (!err)
        (void)settle_images(sb, false);
}

/* The machine is gone but the workspace is whole (it is frozen for a checkpoint): kept as
 * paused, so a resume restores the image when the checkpoint completed, else starts cold
 * from the workspace. */
static bool keep_paused(struct manager *m, struct sandbox *sb)
{
    if (!settle_images(sb, true))
        return false;
    long long now = sbx_wall_ms() / 1000;
    char at[24];
    snprintf(at, sizeof(at), "%lld", now);
    struct sbx_err err = {0};
    if (store_sandbox_set_status(m->store, sb->rec.id, SANDBOX_PAUSED, NULL, 0, &err) < 0 ||
        store_meta_set(m->store, sb->rec.id, STORE_META_PAUSED_AT, at, &err) < 0) {
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
        return false;
    }
    snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_PAUSED);
    sb->paused = true;
    sb->paused_at = now;
    return true;
}

/* A fork freezes its parent's workspace filesystem (a quota image) while the copies are
 * made: after a kill -9 mid-fork every write to it, ours included, would wait forever. */
static void thaw_workspace(const struct manager *m, const struct sandbox *sb)
{
    if (m->ws_template && wsimage_thaw_left(sb->workspace) == 1)
        log_warn("sandbox %s: its workspace was left frozen by a fork: thawed", sb->rec.id);
}

static void reconcile_one(const struct store_sandbox *rec, void *data)
{
    struct reconcile *rc = data;
    struct manager *m = rc->m;
    if (rc->n == rc->cap) {
        rc->cap = rc->cap ? rc->cap * 2 : 16;
        rc->live = sbx_xrealloc(rc->live, rc->cap * sizeof(*rc->live));
    }
    rc->live[rc->n++] = sbx_xstrdup(rec->id);

    struct sandbox *sb = sandbox_from_record(m, rec);
    struct sbx_err err = {0};
    thaw_workspace(m, sb);
    if (sandbox_is_v1(sb)) {
        /* v1 keeps no machine between ops; one caught mid-op by the restart goes. */
        if (rt_alive(sb->state_dir))
            (void)rt_destroy(&m->rt, rec->id, sb->state_dir, NULL, NULL, &err);
        keep(m, sb);
        log_info("sandbox %s: v1, kept", rec->id);
        return;
    }
    if (!strcmp(rec->status, SANDBOX_PAUSED)) {
        /* No shim is normal for a paused sandbox: its image waits on disk. */
        sandbox_keep_paused(m, sb);
        log_info("sandbox %s: paused, kept", rec->id);
        return;
    }
    if (!strcmp(rec->status, SANDBOX_FAILED)) {
        /* Kept with its workspace; whatever of its machine is left goes. */
        if (rt_alive(sb->state_dir))
            (void)rt_destroy(&m->rt, rec->id, sb->state_dir, NULL, NULL, &err);
        keep_failed(m, sb);
        log_info("sandbox %s: failed (%s), kept", rec->id, rec->end_reason);
        return;
    }
    bool complete;
    bool mid_checkpoint = checkpoint_in_flight(sb, &complete);
    /* A fork's parent held paused by its checkpoint (rt_checkpoint) goes on: the copies
     * that were being made from it are not (they never reached the store as running). */
    bool held = rt_held(sb->state_dir);
    if (held && rt_release(&m->rt, rec->id, sb->state_dir, &err) < 0)
        log_warn("sandbox %s: resuming after a fork's checkpoint: %s", rec->id, err.msg);
    if ((mid_checkpoint && complete && !held && stopped_by_checkpoint(sb)) ||
        !rt_alive(sb->state_dir) || sandbox_attach(m, sb, &err) < 0) {
        if (mid_checkpoint && keep_paused(m, sb)) {
            keep(m, sb);
            log_warn("sandbox %s: sbxd stopped during its pause or fork; kept paused", rec->id);
            return;
        }
        if (sb->boot_id[0] && !sandbox_is_pooled(sb)) {
            /* It ran: its workspace is never deleted (docs/runtime.md). */
            log_warn("sandbox %s: not running any more (%s): kept as failed", rec->id, err.msg);
            (void)rt_destroy(&m->rt, rec->id, sb->state_dir, NULL, NULL, &err);
            (void)store_sandbox_set_failed(m->store, rec->id, "lost", NULL);
            snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_FAILED);
            snprintf(sb->rec.end_reason, sizeof(sb->rec.end_reason), "lost");
            keep_failed(m, sb);
            return;
        }
        log_warn("sandbox %s: not running any more, cleaning up %s", rec->id, err.msg);
        (void)store_sandbox_set_status(m->store, rec->id, SANDBOX_FAILED, "lost",
                                       sbx_wall_ms() / 1000, NULL);
        (void)rt_destroy(&m->rt, rec->id, sb->state_dir, sb->dir, NULL, &err);
        sandbox_free(sb);
        return;
    }
    /* The machine runs on (the checkpoint failed, or it is a fork's parent restoring from
     * the image): the image goes once the agent is back, not while a restore reads it. */
    if (mid_checkpoint)
        sandbox_when_ready(sb, drop_images_when_ready, NULL);
    keep(m, sb);
    log_info("sandbox %s: re-attached", rec->id);
}

static bool is_live(const struct reconcile *rc, const char *id)
{
    for (size_t i = 0; i < rc->n; i++)
        if (!strcmp(rc->live[i], id))
            return true;
    return false;
}

/* Whatever runs or lies on disk without a live record goes. */
static void sweep_orphans(struct manager *m, const struct reconcile *rc)
{
    char **ids = NULL;
    struct sbx_err lerr = {0};
    if (rt_list(&m->rt, &ids, &lerr) == 0) {
        for (char **p = ids; *p; p++) {
            if (is_live(rc, *p))
                continue;
            log_warn("container %s has no live sandbox: removing it", *p);
            _cleanup_free_ char *dir = sbx_xasprintf("%s/sandboxes/%s", m->cfg->data_dir, *p);
            _cleanup_free_ char *state = sbx_xasprintf("%s/state", dir);
            (void)rt_destroy(&m->rt, *p, state, dir, NULL, &lerr);
        }
        rt_strv_free(ids);
    } else {
        log_warn("listing containers: %s", lerr.msg);
    }
    _cleanup_free_ char *sbdir = sbx_xasprintf("%s/sandboxes", m->cfg->data_dir);
    DIR *d = opendir(sbdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || is_live(rc, de->d_name))
            continue;
        _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", sbdir, de->d_name);
        _cleanup_free_ char *state = sbx_xasprintf("%s/state", dir);
        if (!rt_alive(state)) {
            log_info("removing leftover sandbox dir %s", dir);
            (void)rt_destroy(&m->rt, de->d_name, state, dir, NULL, &lerr);
        }
    }
    closedir(d);
}

int manager_start(struct manager *m, struct sbx_err *err)
{
    struct reconcile rc = {.m = m};
    /* Nothing runs across a restart of ours: the agent drops a former daemon's execs. */
    int r = store_exec_interrupt_running(m->store, sbx_wall_ms(), err);
    if (r == 0)
        r = store_idem_release_in_progress(m->store, err);
    if (r == 0)
        r = store_sandbox_each_live(m->store, NULL, store_node(m->store), reconcile_one, &rc,
                                    err);
    if (r == 0)
        sweep_orphans(m, &rc);
    if (r == 0)
        r = manager_runtimes_init(m, err);
    for (size_t i = 0; i < rc.n; i++)
        free(rc.live[i]);
    free(rc.live);
    return r;
}
