/* Import circle with installs.c (allowed inside a folder, docs/architecture.md#layering):
 * installs.c keeps the configurations' installs and starts rounds (install_run.c); a round,
 * when it ends, places the bundle and rolls it out through installs.c (installs_place,
 * installs_rollout). Both are the skills folder's; nothing outside sees the loop. */
#include "install_run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../exec/exec.h"
#include "../http/server.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "../snapshot/snapshot.h"
#include "catalog.h"
#include "install_agent.h"
#include "installs.h"

/* Install sandboxes belong to sbx, not to the admin who asked: they count against no
 * one's sandbox limits and get no one's personal variables. */
static const struct auth_identity installer = {
    .authenticated = true,
    .user = INSTALL_USER,
    .key_id = INSTALL_USER,
    .role = AUTH_ROLE_ADMIN,
    .tool_level = AUTH_TOOL_SANDBOX,
};

enum run_state { RUN_QUEUED, RUN_STARTING, RUN_RUNNING, RUN_FINISHING, RUN_DONE };

struct follower {
    struct http_req *req;
    struct install_run *run;
    bool transcript;
    struct follower *next;
};

struct install_run {
    struct installs *ins;
    char id[STORE_ID_MAX + 1];
    char config_id[STORE_ID_MAX + 1];
    char catalog_id[STORE_SKILL_ID_MAX + 1];
    char name[65];
    char version[33];
    char message_id[STORE_ID_MAX + 1];
    char sandbox_id[STORE_ID_MAX + 1];
    char script[SKILL_INSTALL_MAX + 1];
    struct auth_identity who;
    char *instructions;
    enum run_state state;
    json_t *events, *transcript, *guidance;
    unsigned long long events_dropped;
    size_t log_kept; /* bytes of the script's output in events and transcript */
    int percent;
    struct follower *followers;
    struct sandbox *waiting; /* the sandbox whose readiness it waits for */
    struct exec_run *exec;
    char *section;               /* SKILL.md's install section, for the agent */
    struct install_agent *agent; /* following it */
    int ctl_fd;                  /* INSTALL_CTL_DIR in the install sandbox's workspace */
    bool ok;
    char *error;
    struct loop_timer *finish_timer;
    struct install_run *next;
};

/* --- what subscribers see ------------------------------------------------------------- */

static void send_all(struct install_run *run, bool transcript, json_t *ev)
{
    for (struct follower *f = run->followers; f; f = f->next)
        if (f->transcript == transcript)
            (void)http_sse_event(f->req, json_incref(ev));
}

/* Bytes a command printed, as JSON text: what is not UTF-8 becomes '?'. */
static json_t *text_of(const char *buf, size_t len)
{
    if (sbx_utf8_valid(buf, len))
        return json_stringn(buf, len);
    _cleanup_free_ char *copy = sbx_xmalloc(len + 1);
    for (size_t i = 0; i < len; i++)
        copy[i] = (unsigned char)buf[i] >= 0x80 || !buf[i] ? '?' : buf[i];
    return json_stringn(copy, len);
}

/* stream: "stdout"/"stderr" for a chunk of the install script's output, NULL for sbxd's own
 * notes; a reader joins the chunks of one stream into whole lines and gives each note its own
 * line (a chunk ends where a read ended, not where a line does). */
static void emit_stream(struct install_run *run, int percent, const char *stage, json_t *log,
                        const char *stream, const char *status, bool done)
{
    if (percent > run->percent)
        run->percent = percent;
    json_t *ev = json_pack("{s:i,s:s,s:b}", "percent", run->percent, "stage", stage, "done", done);
    if (log)
        json_object_set_new(ev, "log", log);
    if (stream)
        json_object_set_new(ev, "stream", json_string(stream));
    if (status)
        json_object_set_new(ev, "status", json_string(status));
    if (json_array_size(run->events) < INSTALL_EVENTS_MAX || done)
        json_array_append(run->events, ev);
    else
        run->events_dropped++;
    send_all(run, false, ev);
    json_decref(ev);
}

static void emit(struct install_run *run, int percent, const char *stage, json_t *log,
                 const char *status, bool done)
{
    emit_stream(run, percent, stage, log, NULL, status, done);
}

static void note(struct install_run *run, const char *kind, json_t *text, const char *stream)
{
    if (!text)
        text = json_string("(not UTF-8)");
    json_t *e = json_pack("{s:I,s:I,s:s,s:o}", "seq", (json_int_t)json_array_size(run->transcript),
                          "at", (json_int_t)sbx_wall_ms(), "kind", kind, "text", text);
    if (stream)
        json_object_set_new(e, "stream", json_string(stream));
    if (json_array_size(run->transcript) < INSTALL_EVENTS_MAX || !strcmp(kind, "result"))
        json_array_append(run->transcript, e);
    send_all(run, true, e);
    json_decref(e);
}

static void step(struct install_run *run, int percent, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void step(struct install_run *run, int percent, const char *stage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        abort();
    va_end(ap);
    note(run, "step", json_string(text), NULL);
    emit(run, percent, stage, json_string(text), NULL, false);
    free(text);
}

static void follower_gone(struct http_req *req, void *data)
{
    struct follower *f = data;
    for (struct follower **pp = &f->run->followers; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    free(f); /* the install runs on: a subscriber leaving never stops it */
}

static void end_followers(struct install_run *run)
{
    while (run->followers) {
        struct follower *f = run->followers;
        run->followers = f->next;
        http_sse_end(f->req);
        free(f);
    }
}

/* --- the round ----------------------------------------------------------------------- */

static struct store *store_of(struct install_run *run)
{
    return run->ins->d->store;
}

static struct sandbox *install_sandbox(struct install_run *run)
{
    struct sandbox *sb = NULL;
    if (!run->sandbox_id[0] ||
        manager_lookup(run->ins->d->mgr, &run->who, run->sandbox_id, &sb, NULL) < 0)
        return NULL;
    return sb;
}

static void write_transcript(struct install_run *run)
{
    _cleanup_free_ char *dir = sbx_xasprintf("%s/transcripts", run->ins->dir);
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s.json", dir, run->id);
    _cleanup_free_ char *tmp = sbx_xasprintf("%s.tmp", path);
    if (sbx_mkdir_p(dir, 0700) < 0 || json_dump_file(run->transcript, tmp, JSON_COMPACT) < 0 ||
        rename(tmp, path) < 0)
        log_warn("skill install %s: the transcript was not kept", run->id);
}

static void kick(struct installs *ins);

/* The outcome, into the store and to subscribers; the sandbox goes. */
static void run_finish(struct install_run *run)
{
    struct installs *ins = run->ins;
    if (run->finish_timer) {
        loop_timer_cancel(ins->d->loop, run->finish_timer);
        run->finish_timer = NULL;
    }
    struct sandbox *sb = install_sandbox(run);
    struct sbx_err err = {0};
    char snap[STORE_ID_MAX + 1] = "";
    if (run->ctl_fd >= 0) {
        close(run->ctl_fd);
        run->ctl_fd = -1;
    }
    if (run->ok && sb) {
        step(run, 92, "snapshot", "keeping the workspace as the configuration's snapshot");
        _cleanup_close_ int root = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0)
            (void)sbx_rm_rf_at(root, INSTALL_CTL_DIR);
        sbx_random_id("sksnap_", 8, snap, sizeof(snap));
        _cleanup_free_ char *dir = sbx_xasprintf("%s/snapshots/%s", ins->dir, snap);
        int r = sbx_mkdir_p(dir, 0700);
        if (r < 0)
            sbx_err_sys(&err, -r, "creating %s", dir);
        else
            r = snapshot_workspace_copy(ins->d->mgr, sb, dir, NULL, &err);
        if (r < 0) {
            (void)sbx_rm_rf(dir);
            snap[0] = '\0';
            run->ok = false;
            free(run->error);
            run->error = sbx_xasprintf("keeping the workspace: %s", err.msg);
        }
    } else if (run->ok) {
        run->ok = false;
        run->error = sbx_xstrdup("the install sandbox is gone");
    }
    struct store_skill_install rec = {0};
    char prev[STORE_ID_MAX + 1] = "";
    if (store_skill_install_get(store_of(run), NULL, run->id, &rec, NULL) == 0 &&
        !strcmp(rec.message_id, run->message_id)) {
        snprintf(rec.status, sizeof(rec.status), "%s", run->ok ? "ready" : "failed");
        free(rec.error);
        rec.error = run->ok ? NULL : sbx_xstrdup(run->error ? run->error : "failed");
        if (run->ok) {
            snprintf(rec.served_catalog_id, sizeof(rec.served_catalog_id), "%s", run->catalog_id);
            snprintf(rec.served_version, sizeof(rec.served_version), "%s", run->version);
            snprintf(rec.snapshot_id, sizeof(rec.snapshot_id), "%s", snap);
            (void)store_skill_config_snapshot_get(store_of(run), run->config_id, prev, NULL);
        }
        rec.updated_at = sbx_wall_ms() / 1000;
        if (store_skill_install_put(store_of(run), &rec, &err) < 0 ||
            (run->ok &&
             (store_skill_config_snapshot_set(store_of(run), run->config_id, snap, &err) < 0 ||
              store_skill_installs_repoint(store_of(run), run->config_id, snap, &err) < 0)))
            log_warn("skill install %s: recording the outcome: %s", run->id, err.msg);
    } else if (snap[0]) {
        install_snapshot_gc(ins, snap); /* the install went meanwhile */
    }
    store_skill_install_clear(&rec);
    const char *status = run->ok ? "ready" : "failed";
    note(run, "result",
         run->ok ? json_sprintf("ready: %s %s", run->name, run->version)
                 : json_sprintf("failed: %s", run->error ? run->error : "failed"),
         NULL);
    emit(run, 100, status, run->ok ? NULL : json_string(run->error ? run->error : ""), status,
         true);
    end_followers(run);
    write_transcript(run);
    if (sb) {
        struct sbx_err derr = {0};
        if (manager_destroy(ins->d->mgr, sb, "skill_install_done", &derr) < 0)
            log_warn("skill install %s: destroying %s: %s", run->id, run->sandbox_id, derr.msg);
    }
    if (prev[0] && strcmp(prev, snap))
        install_snapshot_gc(ins, prev);
    run->state = RUN_DONE;
    if (run->ok)
        installs_rollout(ins, run->config_id);
    log_info("skill install %s (%s into %s): %s%s%s", run->id, run->name, run->config_id, status,
             run->ok ? "" : ": ", run->ok ? "" : run->error);
    kick(ins);
}

static void on_finish_timer(struct loop *l, void *data)
{
    struct install_run *run = data;
    run->finish_timer = NULL;
    run_finish(run);
}

/* Decided: finished on the next loop turn, outside the callback that decided it. */
static void conclude(struct install_run *run, bool ok, const char *error)
{
    if (run->state >= RUN_FINISHING)
        return;
    run->state = RUN_FINISHING;
    run->ok = ok;
    free(run->error);
    run->error = error ? sbx_xstrdup(error) : NULL;
    if (run->error && !sbx_utf8_valid(run->error, strlen(run->error)))
        for (char *c = run->error; *c; c++) /* it goes into JSON answers */
            if ((unsigned char)*c >= 0x80)
                *c = '?';
    run->finish_timer = loop_timer_add(run->ins->d->loop, 0, on_finish_timer, run);
}

static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct install_run *run = data;
    if (run->log_kept >= INSTALL_LOG_KEPT_MAX)
        return;
    run->log_kept += len;
    if (run->log_kept >= INSTALL_LOG_KEPT_MAX) {
        note(run, "step", json_sprintf("output past %u bytes is not kept", INSTALL_LOG_KEPT_MAX),
             NULL);
        len -= run->log_kept - INSTALL_LOG_KEPT_MAX;
    }
    for (size_t off = 0; off < len;) {
        size_t n = len - off > INSTALL_LOG_CHUNK_MAX ? INSTALL_LOG_CHUNK_MAX : len - off;
        const char *p = (const char *)buf + off;
        note(run, "output", text_of(p, n), ch == PROTO_CH_STDERR ? "stderr" : "stdout");
        emit_stream(run, run->percent < 88 ? run->percent + 1 : 88, "install", text_of(p, n),
                    ch == PROTO_CH_STDERR ? "stderr" : "stdout", NULL, false);
        off += n;
    }
}

static void on_exec_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct install_run *run = data;
    run->exec = NULL;
    if (err) {
        _cleanup_free_ char *why = sbx_xasprintf("the install script: %s", err->msg);
        conclude(run, false, why);
        return;
    }
    note(run, "exit",
         json_sprintf("exit code %d%s", res->exit_code, res->timed_out ? " (timed out)" : ""),
         NULL);
    if (res->exit_code == 0 && !res->timed_out) {
        conclude(run, true, NULL);
        return;
    }
    _cleanup_free_ char *why =
        res->timed_out ? sbx_xasprintf("the install script ran past %d s", INSTALL_SCRIPT_TIMEOUT_S)
                       : sbx_xasprintf("the install script exited with %d", res->exit_code);
    conclude(run, false, why);
}

static const struct exec_observer exec_obs = {.on_output = on_output, .on_done = on_exec_done};

static int write_ctl(int dir, const char *name, const char *text, bool append)
{
    int fd =
        openat(dir, name,
               O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0)
        return -errno;
    int r = sbx_write_all(fd, text, strlen(text));
    close(fd);
    return r;
}

static void deliver_guidance(struct install_run *run)
{
    size_t i;
    json_t *m;
    json_array_foreach(run->guidance, i, m)
    {
        if (run->ctl_fd < 0 || strcmp(json_string_value(json_object_get(m, "status")), "queued"))
            continue;
        _cleanup_free_ char *text =
            sbx_xasprintf("%s\n", json_string_value(json_object_get(m, "content")));
        if (write_ctl(run->ctl_fd, "guidance.md", text, true) == 0)
            json_object_set_new(m, "status", json_string("delivered"));
    }
}

/* The bundle at /workspace/skills/<name> and the control files beside the workspace. */
static int place(struct install_run *run, struct sandbox *sb, struct sbx_err *err)
{
    _cleanup_close_ int root = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0)
        return sbx_err_sys(err, errno, "opening the workspace");
    if (mkdirat(root, INSTALL_SKILLS_DIR, 0755) < 0 && errno != EEXIST)
        return sbx_err_sys(err, errno, "creating /workspace/skills");
    _cleanup_close_ int skills =
        openat(root, INSTALL_SKILLS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (skills < 0)
        return sbx_err_sys(err, errno, "opening /workspace/skills");
    _cleanup_free_ char *src = skills_path(run->ins->d->skills, run->catalog_id);
    int r = installs_place(src, skills, run->name, err);
    if (r < 0)
        return r;
    if ((r = sbx_rm_rf_at(root, INSTALL_CTL_DIR)) < 0 || mkdirat(root, INSTALL_CTL_DIR, 0755) < 0)
        return sbx_err_sys(err, r < 0 ? -r : errno, "making /workspace/" INSTALL_CTL_DIR);
    run->ctl_fd = openat(root, INSTALL_CTL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (run->ctl_fd < 0 ||
        write_ctl(run->ctl_fd, "instructions.md", run->instructions ? run->instructions : "",
                  false) < 0 ||
        write_ctl(run->ctl_fd, "guidance.md", "", false) < 0)
        return sbx_err_sys(err, errno, "writing /workspace/" INSTALL_CTL_DIR);
    deliver_guidance(run);
    return 0;
}

/* What every install step sees beside the configuration's env. */
static json_t *step_env(const struct install_run *run)
{
    _cleanup_free_ char *dir = sbx_xasprintf("/workspace/" INSTALL_SKILLS_DIR "/%s", run->name);
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "SKILL_NAME", run->name, "SKILL_VERSION",
                     run->version, "SKILL_DIR", dir, "SKILL_INSTRUCTIONS_FILE",
                     "/workspace/" INSTALL_CTL_DIR "/instructions.md", "SKILL_GUIDANCE_FILE",
                     "/workspace/" INSTALL_CTL_DIR "/guidance.md");
}

static int run_script(struct install_run *run, struct sandbox *sb, struct sbx_err *err)
{
    _cleanup_free_ char *cwd = sbx_xasprintf("/workspace/" INSTALL_SKILLS_DIR "/%s", run->name);
    json_t *env = step_env(run);
    struct exec_params p = {
        .argv = json_pack("[s,s]", "/bin/sh", run->script),
        .env = env,
        .cwd = cwd,
        .timeout_s = INSTALL_SCRIPT_TIMEOUT_S,
        .command = run->script,
        .language = "shell",
        .cwd_given = true,
        .timeout_given = true,
    };
    char request_id[32];
    snprintf(request_id, sizeof(request_id), "skill-install");
    struct exec_origin o = {.who = &run->who, .request_id = request_id, .action = "exec"};
    int r = exec_start(sb, &p, &o, &exec_obs, run, &run->exec, err);
    exec_params_clear(&p);
    json_decref(env);
    return r;
}

/* --- the install agent's host ------------------------------------------------------- */

static void agent_note(void *data, const char *kind, const char *text)
{
    struct install_run *run = data;
    size_t n = strlen(text);
    note(run, kind, text_of(text, n > INSTALL_LOG_CHUNK_MAX ? INSTALL_LOG_CHUNK_MAX : n), NULL);
    emit(run, run->percent < 88 ? run->percent + 2 : 88, "install",
         text_of(text, n > INSTALL_LOG_CHUNK_MAX ? INSTALL_LOG_CHUNK_MAX : n), NULL, false);
}

static void agent_output(void *data, unsigned ch, const uint8_t *buf, size_t len)
{
    on_output(ch, buf, len, data);
}

static json_t *agent_guidance(void *data)
{
    struct install_run *run = data;
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(run->guidance, i, m)
    {
        json_array_append(out, json_object_get(m, "content"));
        json_object_set_new(m, "status", json_string("delivered"));
    }
    return out;
}

static void agent_done(void *data, bool ok, const char *why)
{
    struct install_run *run = data;
    run->agent = NULL;
    conclude(run, ok, why);
}

static const struct install_agent_host agent_host = {
    .note = agent_note,
    .output = agent_output,
    .guidance = agent_guidance,
    .done = agent_done,
};

static int run_agent(struct install_run *run, struct sbx_err *err)
{
    json_t *env = step_env(run);
    struct install_agent_params p = {
        .llm = run->ins->d->llm,
        .mgr = run->ins->d->mgr,
        .who = &run->who,
        .sandbox_id = run->sandbox_id,
        .name = run->name,
        .section = run->section,
        .instructions = run->instructions,
        .env = env,
    };
    int r = install_agent_start(&p, &agent_host, run, &run->agent, err);
    json_decref(env);
    return r;
}

static void on_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct install_run *run = data;
    run->waiting = NULL;
    if (err) {
        _cleanup_free_ char *why = sbx_xasprintf("the install sandbox: %s", err->msg);
        conclude(run, false, why);
        return;
    }
    struct sbx_err e = {0};
    if (place(run, sb, &e) < 0) {
        conclude(run, false, e.msg);
        return;
    }
    step(run, 30, "unpack", "placed %s %s at /workspace/" INSTALL_SKILLS_DIR "/%s", run->name,
         run->version, run->name);
    bool agent = !run->script[0] && run->section && run->ins->d->llm;
    if (!run->script[0] && !agent) {
        step(run, 80, "install", "SKILL.md declares no install script");
        conclude(run, true, NULL);
        return;
    }
    char off[8] = "";
    if (store_setting_get(store_of(run), STORE_SETTING_SCRIPTS_DISABLED, off, sizeof(off), NULL) ==
            0 &&
        !strcmp(off, "1")) {
        /* A skill whose steps did not run is not installed (docs/configs.md). */
        _cleanup_free_ char *why =
            sbx_xasprintf("%s was not run: the workspace disables scripts (scripts_disabled)",
                          agent ? "the install agent" : run->script);
        conclude(run, false, why);
        return;
    }
    if (agent) {
        step(run, 40, "install", "the install agent follows SKILL.md's install section");
        run->state = RUN_RUNNING;
        if (run_agent(run, &e) < 0)
            conclude(run, false, e.msg);
        return;
    }
    step(run, 40, "install", "running /bin/sh %s in /workspace/" INSTALL_SKILLS_DIR "/%s",
         run->script, run->name);
    run->state = RUN_RUNNING;
    if (run_script(run, sb, &e) < 0)
        conclude(run, false, e.msg);
}

static void launch(struct install_run *run)
{
    struct installs *ins = run->ins;
    struct sbx_err err = {0};
    struct skill_meta meta = {0};
    run->state = RUN_STARTING;
    if (skills_meta(ins->d->skills, run->catalog_id, &meta, &err) < 0) {
        conclude(run, false, err.msg);
        return;
    }
    snprintf(run->script, sizeof(run->script), "%s", meta.install);
    skill_meta_clear(&meta);
    if (!run->script[0] && ins->d->llm) {
        _cleanup_free_ char *dir = skills_path(ins->d->skills, run->catalog_id);
        _cleanup_free_ char *md_path = sbx_xasprintf("%s/SKILL.md", dir);
        _cleanup_free_ char *md = NULL;
        size_t len = 0;
        if (sbx_read_file(md_path, SKILL_MD_MAX, &md, &len) == 0)
            run->section = install_agent_section(md, len);
    }
    json_t *body = json_pack("{s:s}", "config_id", run->config_id);
    struct sandbox_params p;
    struct sandbox *sb = NULL;
    int r = sandbox_params_parse(body, &p, &err);
    if (r == 0)
        r = manager_create(ins->d->mgr, &run->who, &p, on_ready, run, &sb, &err);
    json_decref(body);
    if (r < 0) {
        _cleanup_free_ char *why = sbx_xasprintf("the install sandbox: %s", err.msg);
        conclude(run, false, why);
        return;
    }
    run->waiting = sb;
    snprintf(run->sandbox_id, sizeof(run->sandbox_id), "%s", sb->rec.id);
    struct store_skill_install rec = {0};
    if (store_skill_install_get(store_of(run), NULL, run->id, &rec, NULL) == 0 &&
        !strcmp(rec.message_id, run->message_id)) {
        snprintf(rec.session_id, sizeof(rec.session_id), "%s", run->sandbox_id);
        (void)store_skill_install_put(store_of(run), &rec, NULL);
    }
    store_skill_install_clear(&rec);
    step(run, 10, "sandbox", "starting sandbox %s of configuration %s", run->sandbox_id,
         run->config_id);
}

static bool config_busy(struct installs *ins, const char *config_id)
{
    for (struct install_run *r = ins->runs; r; r = r->next)
        if (r->state >= RUN_STARTING && r->state <= RUN_FINISHING &&
            !strcmp(r->config_id, config_id))
            return true;
    return false;
}

/* Start every queued round whose configuration has none running, oldest first, as
 * many at once as the installer's sandbox limits allow. */
static void kick(struct installs *ins)
{
    const struct sbxd_config *cfg = &ins->d->cfg;
    long long cap = INSTALL_PARALLEL_MAX;
    if (cfg->max_per_user < cap)
        cap = cfg->max_per_user;
    if (cfg->max_per_key < cap)
        cap = cfg->max_per_key;
    bool again = true;
    while (again) {
        again = false;
        long long busy = 0;
        for (struct install_run *r = ins->runs; r; r = r->next)
            busy += r->state >= RUN_STARTING && r->state <= RUN_FINISHING;
        if (busy >= cap)
            return;
        struct install_run *first = NULL;
        for (struct install_run *r = ins->runs; r; r = r->next)
            if (r->state == RUN_QUEUED && !config_busy(ins, r->config_id))
                first = r; /* the list is newest first: the last one found is the oldest */
        if (first) {
            launch(first);
            again = true;
        }
    }
}

static void run_free(struct install_run *run)
{
    end_followers(run);
    if (run->finish_timer)
        loop_timer_cancel(run->ins->d->loop, run->finish_timer);
    if (run->ctl_fd >= 0)
        close(run->ctl_fd);
    json_decref(run->events);
    json_decref(run->transcript);
    json_decref(run->guidance);
    free(run->instructions);
    free(run->section);
    free(run->error);
    free(run);
}

static void unlink_run(struct installs *ins, struct install_run *run)
{
    for (struct install_run **pp = &ins->runs; *pp; pp = &(*pp)->next)
        if (*pp == run) {
            *pp = run->next;
            return;
        }
}

void install_run_begin(struct installs *ins, const struct auth_identity *who,
                       const struct store_skill_install *rec, const char *instructions)
{
    struct install_run *old = install_run_find(ins, rec->id);
    if (old) { /* a finished round: its subscribers had their end */
        unlink_run(ins, old);
        run_free(old);
    }
    /* The last round's transcript is not this one's, even if this one never ends. */
    _cleanup_free_ char *kept = sbx_xasprintf("%s/transcripts/%s.json", ins->dir, rec->id);
    (void)unlink(kept);
    struct install_run *run = sbx_xcalloc(1, sizeof(*run));
    run->ins = ins;
    snprintf(run->id, sizeof(run->id), "%s", rec->id);
    snprintf(run->config_id, sizeof(run->config_id), "%s", rec->config_id);
    snprintf(run->catalog_id, sizeof(run->catalog_id), "%s", rec->catalog_id);
    snprintf(run->name, sizeof(run->name), "%s", rec->name);
    snprintf(run->version, sizeof(run->version), "%s", rec->version);
    snprintf(run->message_id, sizeof(run->message_id), "%s", rec->message_id);
    run->who = installer;
    run->instructions = instructions ? sbx_xstrdup(instructions) : NULL;
    run->events = json_array();
    run->transcript = json_array();
    run->guidance = json_array();
    run->ctl_fd = -1;
    run->next = ins->runs;
    ins->runs = run;
    emit(run, 0, "queued",
         json_sprintf("%s %s into configuration %s, asked by %s", rec->name, rec->version,
                      rec->config_id, who->user),
         "installing", false);
    kick(ins);
}

struct install_run *install_run_find(struct installs *ins, const char *skill_id)
{
    for (struct install_run *r = ins->runs; r; r = r->next)
        if (!strcmp(r->id, skill_id))
            return r;
    return NULL;
}

bool install_run_owns_sandbox(struct installs *ins, const char *sandbox_id)
{
    for (struct install_run *r = ins->runs; r; r = r->next)
        if (r->state != RUN_DONE && !strcmp(r->sandbox_id, sandbox_id))
            return true;
    return false;
}

bool install_run_active(const struct install_run *run)
{
    return run && run->state != RUN_DONE;
}

void install_run_stop(struct install_run *run, const char *who)
{
    if (!install_run_active(run))
        return;
    if (run->state == RUN_FINISHING) { /* decided already: that outcome stands */
        run_finish(run);
        return;
    }
    if (run->waiting) {
        sandbox_drop_waiter(run->waiting, run);
        run->waiting = NULL;
    }
    if (run->exec) {
        exec_kill(run->exec);
        exec_abandon(run->exec);
        run->exec = NULL;
    }
    install_agent_stop(run->agent);
    run->agent = NULL;
    note(run, "step", json_sprintf("stopped by %s", who), NULL);
    run->state = RUN_FINISHING;
    run->ok = false;
    free(run->error);
    run->error = sbx_xasprintf("stopped by %s", who);
    run_finish(run);
}

void install_run_forget(struct installs *ins, const char *skill_id)
{
    struct install_run *run = install_run_find(ins, skill_id);
    if (!run)
        return;
    install_run_stop(run, "the install's deletion");
    unlink_run(ins, run);
    run_free(run);
}

void install_run_free_all(struct installs *ins)
{
    while (ins->runs) {
        struct install_run *run = ins->runs;
        ins->runs = run->next;
        if (run->waiting)
            sandbox_drop_waiter(run->waiting, run);
        if (run->exec)
            exec_abandon(run->exec);
        install_agent_stop(run->agent);
        run_free(run);
    }
}

/* --- guidance ------------------------------------------------------------------------ */

json_t *install_run_guidance(const struct install_run *run)
{
    json_t *msgs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(run ? run->guidance : NULL, i, m)
    {
        json_array_append_new(msgs, json_pack("{s:O,s:O,s:O,s:O}", "id", json_object_get(m, "id"),
                                              "steer_id", json_object_get(m, "steer_id"), "content",
                                              json_object_get(m, "content"), "status",
                                              json_object_get(m, "status")));
    }
    return json_pack("{s:b,s:s?,s:o}", "accepting",
                     run && run->state >= RUN_QUEUED && run->state <= RUN_RUNNING, "message_id",
                     run ? run->message_id : NULL, "messages", msgs);
}

int install_run_guide(struct install_run *run, const char *message_id, const char *steer_id,
                      const char *content, struct sbx_err *err)
{
    if (!run || run->state > RUN_RUNNING || strcmp(message_id, run->message_id))
        return sbx_err_set(err, EBUSY, "install_moved_on",
                           "the install is no longer in round %.40s: read install_message_id "
                           "again",
                           message_id);
    size_t i;
    json_t *m;
    json_array_foreach(run->guidance, i, m)
    {
        if (!strcmp(json_string_value(json_object_get(m, "steer_id")), steer_id))
            return 0; /* a retry: added once */
    }
    if (json_array_size(run->guidance) >= INSTALL_GUIDANCE_MSGS_MAX)
        return sbx_err_set(err, EAGAIN, "too_many_guidance_messages",
                           "at most %d guidance messages a round", INSTALL_GUIDANCE_MSGS_MAX);
    char id[STORE_ID_MAX + 1];
    sbx_random_id("gdn_", 8, id, sizeof(id));
    json_array_append_new(run->guidance,
                          json_pack("{s:s,s:s,s:s,s:s}", "id", id, "steer_id", steer_id, "content",
                                    content, "status", "queued"));
    note(run, "guidance", json_string(content), NULL);
    deliver_guidance(run);
    return 0;
}

/* --- following ----------------------------------------------------------------------- */

int install_run_follow(struct installs *ins, struct install_run *run,
                       const struct store_skill_install *rec, bool transcript, struct http_req *req,
                       struct sbx_err *err)
{
    json_t *past = NULL;
    if (!run && transcript) {
        _cleanup_free_ char *path = sbx_xasprintf("%s/transcripts/%s.json", ins->dir, rec->id);
        past = json_load_file(path, 0, NULL);
        if (!json_is_array(past)) {
            json_decref(past);
            return sbx_err_set(err, ENOENT, "transcript_not_found",
                               "no transcript of skill %s's install is kept", rec->id);
        }
    } else if (!run) {
        bool done = strcmp(rec->status, "installing") != 0;
        past = json_pack("[{s:i,s:s,s:s,s:b}]", "percent", done ? 100 : 0, "stage", rec->status,
                         "status", rec->status, "done", 1);
        if (rec->error)
            json_object_set_new(json_array_get(past, 0), "log", json_string(rec->error));
    } else if (transcript && json_array_size(run->transcript) == 0) {
        return sbx_err_set(err, EAGAIN, "transcript_not_ready",
                           "the install has only begun: try again shortly");
    }
    json_t *list = past ? past : transcript ? run->transcript : run->events;
    struct follower *f = NULL;
    if (install_run_active(run)) {
        f = sbx_xcalloc(1, sizeof(*f));
        f->req = req;
        f->run = run;
        f->transcript = transcript;
    }
    http_sse_begin(req, f ? follower_gone : NULL, f);
    size_t i;
    json_t *ev;
    json_array_foreach(list, i, ev)
    {
        (void)http_sse_event(req, json_incref(ev));
    }
    json_decref(past);
    if (f) {
        f->next = run->followers;
        run->followers = f;
    } else {
        http_sse_end(req);
    }
    return 0;
}

/* --- snapshots ----------------------------------------------------------------------- */

char *install_snapshot_path(struct installs *ins, const char *snapshot_id)
{
    static const char *const kinds[] = {"workspace.img", "workspace"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(kinds); i++) {
        char *p = sbx_xasprintf("%s/snapshots/%s/%s", ins->dir, snapshot_id, kinds[i]);
        if (access(p, F_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

void install_snapshot_gc(struct installs *ins, const char *snapshot_id)
{
    bool used = true;
    if (!snapshot_id[0] || strchr(snapshot_id, '/') ||
        store_skill_snapshot_used(ins->d->store, snapshot_id, &used, NULL) < 0 || used)
        return;
    _cleanup_free_ char *dir = sbx_xasprintf("%s/snapshots/%s", ins->dir, snapshot_id);
    (void)sbx_rm_rf(dir);
}
