#include "warm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../exec/exec.h"
#include "../snapshot/snapshot.h"
#include "poolspec.h"

enum warm_stage { WARM_BOOTING, WARM_RUNNING, WARM_PAUSING, WARM_READY, WARM_FAILED };

struct warm_image {
    struct warm_images *w;
    char name[TEMPLATE_NAME_MAX + 1];
    char digest[TEMPLATE_DIGEST_MAX + 1];
    char holder[STORE_ID_MAX + 1]; /* the paused sandbox whose image it is */
    enum warm_stage stage;
    char *image; /* its checkpoint image, once ready */
};

struct warm_images {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct manager *mgr;
    struct warm_image img[POOL_TEMPLATES_MAX];
    size_t n;
};

struct find {
    const char *id;
    struct sandbox *sb;
};

static void find_cb(struct sandbox *sb, void *data)
{
    struct find *f = data;
    if (!strcmp(sb->rec.id, f->id) && !sb->ended)
        f->sb = sb;
}

static struct sandbox *holder_of(struct warm_image *wi)
{
    struct find f = {.id = wi->holder};
    if (wi->holder[0])
        manager_each(wi->w->mgr, "", find_cb, &f);
    return f.sb;
}

static void warm_failed(struct warm_image *wi, const char *why)
{
    log_warn("warm snapshot %s: %s; creates of %s start cold", wi->name, why, wi->name);
    wi->stage = WARM_FAILED;
    struct sandbox *sb = holder_of(wi);
    struct sbx_err err = {0};
    if (sb)
        (void)manager_destroy(wi->w->mgr, sb, "pool_yield", &err);
    wi->holder[0] = '\0';
}

static void on_paused(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct warm_image *wi = data;
    if (err || !sb->paused) {
        warm_failed(wi, err ? err->msg : "the checkpoint did not pause it");
        return;
    }
    free(wi->image);
    wi->image = sbx_xasprintf("%s/snapshots/memory", sb->dir);
    wi->stage = WARM_READY;
    log_info("warm snapshot %s: ready (sandbox %s, %lld bytes)", wi->name, sb->rec.id,
             sandbox_snapshot_bytes(sb));
}

static void pause_holder(struct loop *l, void *data)
{
    struct warm_image *wi = data;
    struct sandbox *sb = holder_of(wi);
    struct sbx_err err = {0};
    if (!sb)
        warm_failed(wi, "its sandbox went away");
    else if (snapshot_pause(wi->w->mgr, sb, on_paused, wi, &err) < 0)
        warm_failed(wi, err.msg);
}

static void on_warmed(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct warm_image *wi = data;
    struct sandbox *sb = holder_of(wi);
    if (err || !res || res->exit_code != 0 || res->timed_out || !sb) {
        char why[sizeof(err->msg) + 64];
        snprintf(why, sizeof(why), "%s failed: %s", WARM_SCRIPT,
                 err   ? err->msg
                 : !sb ? "its sandbox went away"
                       : "non-zero exit");
        warm_failed(wi, why);
        return;
    }
    /* The pause waits for the exec to be wholly over (it refuses a busy sandbox). */
    wi->stage = WARM_PAUSING;
    (void)loop_timer_add(wi->w->loop, 0, pause_holder, wi);
}

static const struct exec_observer warm_obs = {.on_done = on_warmed};

static void on_booted(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct warm_image *wi = data;
    if (err) {
        warm_failed(wi, err->msg);
        return;
    }
    static const struct auth_identity nobody = {0};
    struct exec_params p = {
        .argv = json_pack("[s]", WARM_SCRIPT),
        .cwd = "/tmp",
        .timeout_s = WARM_TIMEOUT_S,
        .command = WARM_SCRIPT,
        .language = "shell",
        .cwd_given = true,
        .timeout_given = true,
    };
    struct exec_origin o = {.who = &nobody, .action = "exec"};
    struct exec_run *run;
    struct sbx_err xerr = {0};
    int r = exec_start(sb, &p, &o, &warm_obs, wi, &run, &xerr);
    json_decref(p.argv);
    if (r < 0) {
        warm_failed(wi, xerr.msg);
        return;
    }
    wi->stage = WARM_RUNNING;
}

static void warm_start(struct warm_image *wi)
{
    struct warm_images *w = wi->w;
    struct template_info tpl;
    struct sbx_err err = {0};
    if (template_resolve(w->cfg->template_cache, wi->name, &tpl, &err) < 0) {
        warm_failed(wi, err.msg);
        return;
    }
    _cleanup_free_ char *script = sbx_xasprintf("%s%s", tpl.rootfs, WARM_SCRIPT);
    snprintf(wi->digest, sizeof(wi->digest), "%s", tpl.digest);
    template_info_clear(&tpl);
    if (access(script, X_OK) < 0) {
        warm_failed(wi, "the template has no " WARM_SCRIPT);
        return;
    }
    struct sandbox *sb;
    if (manager_create_pooled(w->mgr, wi->name, on_booted, wi, &sb, &err) < 0) {
        warm_failed(wi, err.msg);
        return;
    }
    sb->warm_holder = true;
    snprintf(wi->holder, sizeof(wi->holder), "%s", sb->rec.id);
    wi->stage = WARM_BOOTING;
}

int warm_images_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                    struct warm_images **out, struct sbx_err *err)
{
    struct warm_images *w = sbx_xcalloc(1, sizeof(*w));
    w->cfg = cfg;
    w->loop = l;
    w->mgr = m;
    struct pool_spec spec[POOL_TEMPLATES_MAX];
    size_t n = 0;
    if (cfg->warm_snapshot) {
        int r = warm_snapshot_parse(cfg->warm_snapshot, spec, &n, err);
        if (r < 0) {
            free(w);
            return r;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct warm_image *wi = &w->img[w->n++];
        wi->w = w;
        snprintf(wi->name, sizeof(wi->name), "%s", spec[i].name);
        warm_start(wi);
    }
    *out = w;
    return 0;
}

void warm_images_free(struct warm_images *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->img[i].image);
    free(w);
}

const char *warm_images_find(struct warm_images *w, const char *template_name, const char *digest,
                             char boot_id[33])
{
    for (size_t i = 0; w && i < w->n; i++) {
        struct warm_image *wi = &w->img[i];
        if (strcmp(wi->name, template_name) || wi->stage != WARM_READY ||
            strcmp(wi->digest, digest))
            continue;
        struct sandbox *sb = holder_of(wi);
        if (!sb || !sb->paused) {
            warm_failed(wi, "its paused sandbox is gone");
            return NULL;
        }
        snprintf(boot_id, 33, "%s", sb->boot_id);
        return wi->image;
    }
    return NULL;
}

const char *warm_images_state(struct warm_images *w, const char *template_name)
{
    for (size_t i = 0; w && i < w->n; i++) {
        if (strcmp(w->img[i].name, template_name))
            continue;
        switch (w->img[i].stage) {
        case WARM_READY:
            return "ready";
        case WARM_FAILED:
            return "failed";
        default:
            return "warming";
        }
    }
    return "none";
}
