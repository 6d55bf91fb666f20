/* Import circle with toolws.c: a remote workspace's side of the tools runs there, and hands
 * back here (toolcall.h) once the agent has answered. */
#include "tools.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../bsl/diag.h"
#include "../../common/jsonfind.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../../runtime/oci.h"
#include "../audit/audit.h"
#include "../exec/exec.h"
#include "../files/artifacts.h"
#include "../files/collect.h"
#include "../files/workspace.h"
#include "../http/server.h"
#include "../live/kernel.h"
#include "../live/preview.h"
#include "../live/ptycall.h"
#include "../sbxd.h"
#include "../snapshot/snapcall.h"
#include "fileedit.h"
#include "toolcall.h"
#include "toolws.h"
#include "wschanges.h"

static void call_free(struct tool_call *c)
{
    if (c->ep_set)
        exec_params_clear(&c->ep);
    json_decref(c->args);
    json_decref(c->body);
    json_decref(c->pending);
    ws_listing_free(c->before);
    free(c->link_path);
    json_decref(c->bsl_unsupported);
    toolws_free(c->ws);
    free(c);
}

void tools_finish(struct tool_call *c, json_t *result, const struct sbx_err *err, json_t *details)
{
    c->wait = WAIT_NONE;
    if (!c->abandoned)
        c->cb(err ? NULL : result, err, details, c->data);
    json_decref(result);
    json_decref(details);
    call_free(c);
}

void tools_fail(struct tool_call *c, const struct sbx_err *err)
{
    tools_finish(c, NULL, err, NULL);
}

void tools_call_abandon(struct tool_call *c)
{
    if (!c)
        return;
    c->abandoned = true;
    switch (c->wait) {
    case WAIT_READY:
        sandbox_drop_waiter(c->sb, c);
        break;
    case WAIT_EXEC:
        exec_abandon(c->exec);
        break;
    case WAIT_KERNEL:
        kernel_run_abandon(c->krun);
        break;
    case WAIT_PTY:
        pty_call_cancel(c->pty);
        break;
    case WAIT_SNAP:
        snapcall_forget(c->snap);
        break;
    case WAIT_AGENT:
        toolws_cancel(c->ws);
        break;
    case WAIT_ARTIFACTS:
        return; /* freed when the collection comes back */
    case WAIT_NONE:
        break;
    }
    call_free(c);
}

void tools_call_cancel(struct tool_call *c)
{
    struct sbx_err err = {0};
    if (c && c->wait == WAIT_EXEC)
        exec_kill(c->exec);
    else if (c && c->wait == WAIT_KERNEL) /* KeyboardInterrupt in the cell; the kernel lives */
        (void)kernel_control(c->sb, "kernel_interrupt", NULL, NULL, NULL, &err);
    tools_call_abandon(c);
}

const char *tools_call_exec_id(const struct tool_call *c)
{
    return c && c->wait == WAIT_EXEC && c->exec_id[0] ? c->exec_id : NULL;
}

const char *tools_call_sandbox_id(const struct tool_call *c)
{
    return c && c->sandbox_id[0] ? c->sandbox_id : NULL;
}

static const char *arg_string(const struct tool_call *c, const char *name)
{
    return json_string_value(json_object_get(c->args, name));
}

/* The args without the keys that name the target, for parsers that refuse unknown keys. */
static json_t *args_without(json_t *args, const char *const *keys, size_t n)
{
    json_t *o = json_copy(args);
    for (size_t i = 0; i < n; i++)
        json_object_del(o, keys[i]);
    return o;
}

static int open_root(struct tool_call *c, int *root, struct sbx_err *err)
{
    return ws_open_root(c->sb->workspace, root, err);
}

json_t *tools_file_url(struct tool_call *c, const char *path)
{
    _cleanup_free_ char *enc = artifacts_escape_path(path);
    return json_sprintf("%s/v1/sandboxes/%s/files/%s", c->d->cfg.public_url, c->sandbox_id, enc);
}

/* ---- artifacts' signed links ---- */

static void on_links(json_t *artifacts, const struct sbx_err *aerr, void *data);

void tools_collect_links(struct tool_call *c, json_t *pending)
{
    c->pending = pending;
    c->wait = WAIT_ARTIFACTS;
    files_collect_artifacts(c->d, c->sb, on_links, c);
}

static void on_links(json_t *artifacts, const struct sbx_err *aerr, void *data)
{
    struct tool_call *c = data;
    json_t *doc = TAKE_PTR(c->pending);
    if (c->abandoned) {
        json_decref(artifacts);
        json_decref(doc);
        call_free(c);
        return;
    }
    if (c->def->id == TOOL_SANDBOX_FILES && !c->link_path) { /* op artifacts */
        if (aerr) {
            json_decref(doc);
            tools_fail(c, aerr);
            return;
        }
        json_object_set_new(doc, "artifacts", artifacts);
        tools_finish(c, doc, NULL, NULL);
        return;
    }
    if (c->link_path) { /* a large read under out/ */
        json_t *a = sbx_json_find(artifacts, "path", c->link_path);
        json_t *url = json_object_get(a, "url");
        if (url) {
            json_object_set(doc, "url", url);
            json_object_set(doc, "expires_at", json_object_get(a, "expires_at"));
            json_object_set(doc, "mime", json_object_get(a, "mime"));
        }
    } else { /* sandbox_bash: every output file gets its signed link */
        json_t *paths = json_object_get(doc, "local_paths");
        const char *path;
        json_t *v;
        json_object_foreach(paths, path, v)
        {
            json_t *url = json_object_get(sbx_json_find(artifacts, "path", path), "url");
            if (url)
                json_object_set(paths, path, url);
        }
    }
    if (aerr)
        json_object_set_new(doc, "artifacts_error", json_string(aerr->msg));
    json_decref(artifacts);
    tools_finish(c, doc, NULL, NULL);
}

/* ---- sandboxes ---- */

static void on_created(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    audit_record(c->d->store, &c->who, NULL, c->request_id, "sandbox.create", sb->rec.id,
                 err ? err->code : "ok", NULL);
    tools_finish(c, err ? NULL : sandbox_to_json(sb), err, NULL);
}

static int run_create(struct tool_call *c, struct sbx_err *err)
{
    struct sandbox_params p;
    if (sandbox_params_parse(c->args, &p, err) < 0)
        return sbx_err_ret(err);
    struct sandbox *sb;
    c->wait = WAIT_READY;
    if (manager_create(c->d->mgr, &c->who, &p, on_created, c, &sb, err) < 0) {
        c->wait = WAIT_NONE;
        return sbx_err_ret(err);
    }
    c->sb = sb;
    snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", sb->rec.id);
    return 0;
}

static void append_sandbox(struct sandbox *sb, void *data)
{
    json_array_append_new(data, sandbox_to_json(sb));
}

static int run_list(struct tool_call *c, struct sbx_err *err)
{
    json_t *list = json_array();
    manager_each(c->d->mgr, c->who.user, append_sandbox, list);
    tools_finish(c, json_pack("{s:o}", "sandboxes", list), NULL, NULL);
    return 0;
}

static int run_kill(struct tool_call *c, struct sbx_err *err)
{
    if (manager_destroy_by(c->d->mgr, c->sb, &c->who, c->request_id, "deleted", err) < 0)
        return sbx_err_ret(err);
    c->sb = NULL;
    tools_finish(c, json_pack("{s:s,s:b}", "id", c->sandbox_id, "deleted", 1), NULL, NULL);
    return 0;
}

/* ---- commands ---- */

/* The files the command created or changed anywhere in the workspace; the receipt's
 * (out/ only) when the listings could not be taken. */
static json_t *changed_files(struct tool_call *c, const struct exec_result *res, json_t *o)
{
    _cleanup_close_ int root = -1;
    struct sbx_err err = {0};
    bool cut = false;
    json_t *files = NULL;
    if (c->before && c->sb && !c->sb->ended && ws_open_root(c->sb->workspace, &root, &err) == 0)
        files = ws_listing_changes(c->before, root, &cut, &err);
    if (!files)
        return json_deep_copy(json_object_get(res->receipt, "outputs") ?: json_array());
    if (cut)
        json_object_set_new(o, "files_truncated", json_true());
    return files;
}

static bool truncated(const struct exec_result *res)
{
    return res->out[0].dropped || res->out[1].dropped;
}

static void bsl_done(struct tool_call *c, const struct exec_result *res);

static void on_exec_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    c->exec = NULL;
    if (err) {
        tools_fail(c, err);
        return;
    }
    if (c->def->id == TOOL_BSL_CHECK) {
        bsl_done(c, res);
        return;
    }
    if (c->def->id == TOOL_SANDBOX_EXEC) {
        tools_finish(c, exec_result_to_json(res), NULL, NULL);
        return;
    }
    json_t *o = json_pack("{s:s,s:i,s:b,s:b,s:I}", "exec_id", res->id, "exit_code", res->exit_code,
                          "truncated", truncated(res), "timed_out", res->timed_out, "duration_ms",
                          (json_int_t)res->duration_ms);
    if (res->oom_killed) /* the agent's memory watcher killed it (docs/runtime.md) */
        json_object_set_new(o, "oom_killed", json_true());
    if (res->pids_killed) /* its process guard did (docs/security.md) */
        json_object_set_new(o, "process_limit_killed", json_true());
    exec_output_put(o, "stdout", &res->out[0]);
    exec_output_put(o, "stderr", &res->out[1]);
    if (res->workspace_full)
        json_object_set_new(o, "workspace_full", json_true());
    if (sandbox_workspace_remote(c->sb)) { /* the listing after it is the agent's, too */
        toolws_bash_after(c, o, json_object_get(res->receipt, "outputs"));
        return;
    }
    tools_bash_answer(c, o, changed_files(c, res, o));
}

void tools_bash_answer(struct tool_call *c, json_t *o, json_t *files)
{
    json_t *paths = json_object();
    bool under_out = false;
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        json_object_set_new(paths, path, tools_file_url(c, path));
        under_out |= !strncmp(path, ARTIFACTS_DIR "/", sizeof(ARTIFACTS_DIR));
    }
    json_object_set_new(o, "file_count", json_integer((json_int_t)json_array_size(files)));
    json_object_set_new(o, "files", files);
    json_object_set_new(o, "local_paths", paths);
    if (under_out && c->sb && !c->sb->ended) { /* signed links for those under out/ */
        tools_collect_links(c, o);
        return;
    }
    tools_finish(c, o, NULL, NULL);
}

static const struct exec_observer exec_obs = {.on_done = on_exec_done};

static void on_ready_exec(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    struct sbx_err e = {0};
    c->wait = WAIT_NONE;
    if (err) {
        tools_fail(c, err);
        return;
    }
    _cleanup_close_ int root = -1;
    if (c->def->id == TOOL_SANDBOX_BASH && sandbox_workspace_remote(sb)) {
        toolws_bash_before(c); /* then tools_exec_begin */
        return;
    }
    if (c->def->id == TOOL_SANDBOX_BASH && ws_open_root(sb->workspace, &root, &e) == 0)
        (void)ws_listing_take(root, &c->before, &e); /* without it: the receipt's files */
    tools_exec_begin(c);
}

void tools_exec_begin(struct tool_call *c)
{
    struct sbx_err e = {0};
    struct exec_origin origin = {.who = &c->who, .request_id = c->request_id, .action = "exec"};
    if (exec_start(c->sb, &c->ep, &origin, &exec_obs, c, &c->exec, &e) < 0) {
        tools_fail(c, &e);
        return;
    }
    c->wait = WAIT_EXEC;
    snprintf(c->exec_id, sizeof(c->exec_id), "%s", exec_run_id(c->exec));
}

static int start_exec(struct tool_call *c, json_t *body, struct sbx_err *err)
{
    bool bash = c->def->id == TOOL_SANDBOX_BASH;
    int r = exec_params_parse(body, bash ? TOOLS_BASH_TIMEOUT_MAX : EXEC_TIMEOUT_MAX, &c->ep, err);
    if (r < 0)
        return r;
    c->ep_set = true;
    if (bash && !c->ep.timeout_given) {
        /* Its own default, unless the sandbox's configuration sets one for every command. */
        c->ep.timeout_s =
            c->sb->command_timeout_sec ? c->sb->command_timeout_sec : TOOLS_BASH_TIMEOUT_DEFAULT;
        c->ep.timeout_given = true;
    }
    if (c->sb->exec_busy)
        return sbx_err_set(err, EBUSY, "sandbox_busy", "sandbox %s is already running a command",
                           c->sandbox_id);
    c->wait = WAIT_READY;
    sandbox_when_ready(c->sb, on_ready_exec, c);
    return 0;
}

static int run_bash(struct tool_call *c, struct sbx_err *err)
{
    json_t *cmd = json_object_get(c->args, "command");
    if (!json_is_string(cmd))
        return sbx_err_set(err, EINVAL, "invalid_request", "command must be a string");
    json_t *desc = json_object_get(c->args, "description");
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return sbx_err_set(err, EINVAL, "invalid_request", "description must be a string");
    json_t *t = json_object_get(c->args, "timeout_seconds");
    json_t *body = json_pack("{s:O}", "shell", cmd);
    if (t)
        json_object_set(body, "timeout_seconds", t);
    json_t *cwd = json_object_get(c->args, "cwd");
    if (cwd)
        json_object_set(body, "cwd", cwd);
    c->body = body;
    return start_exec(c, body, err);
}

static int run_exec(struct tool_call *c, struct sbx_err *err)
{
    static const char *const target[] = {"sandbox_id"};
    json_t *poll = json_object_get(c->args, "exec_id");
    if (poll && !json_is_null(poll)) { /* the handle of a command answered while running */
        json_t *rec;
        if (!json_is_string(poll))
            return sbx_err_set(err, EINVAL, "invalid_request", "exec_id must be a string");
        if (exec_record_json(c->d->store, c->sandbox_id, json_string_value(poll), c->who.user, &rec,
                             err) < 0)
            return sbx_err_ret(err);
        tools_finish(c, rec, NULL, NULL);
        return 0;
    }
    json_t *body = args_without(c->args, target, SBX_ARRAY_SIZE(target));
    c->body = body;
    return start_exec(c, body, err);
}

/* ---- bsl_check: sbx-bsl inside the sandbox, as a command ---- */

/* s in single quotes for sh. */
static char *sh_quote(const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = sbx_xmalloc(n), *o = q;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = 0;
    return q;
}

/* The known codes of list as "A,B" in buf (*given: a list was given, even of unknown codes
 * only); bsl-language-server codes sbx-bsl does not have go to *unsupported (new). */
static int bsl_codes(json_t *list, char *buf, size_t size, bool *given, json_t **unsupported,
                     struct sbx_err *err)
{
    size_t i, o = 0;
    json_t *v;
    bool seen[D_COUNT_] = {0};
    buf[0] = 0;
    *given = false;
    *unsupported = NULL;
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list) || json_array_size(list) > TOOLS_BSL_CODES_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "diagnostics must be an array of at most %d codes", TOOLS_BSL_CODES_MAX);
    *given = true;
    json_array_foreach(list, i, v)
    {
        const char *code = json_string_value(v);
        if (!code || !*code || strlen(code) > 64 ||
            strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(code)) {
            json_decref(*unsupported);
            *unsupported = NULL;
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "diagnostics must be codes such as ParseError");
        }
        int id = bsl_diag_by_code(code, strlen(code));
        if (id < 0) {
            if (!*unsupported)
                *unsupported = json_array();
            json_array_append_new(*unsupported, json_string(code));
            continue;
        }
        if (seen[id])
            continue;
        seen[id] = true;
        o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? "," : "", code);
        if (o >= size) {
            json_decref(*unsupported);
            *unsupported = NULL;
            return sbx_err_set(err, EINVAL, "invalid_request", "too many diagnostics");
        }
    }
    return 0;
}

static int run_bsl(struct tool_call *c, struct sbx_err *err)
{
    json_t *p = json_object_get(c->args, "path");
    if (!json_is_string(p))
        return sbx_err_set(err, EINVAL, "invalid_request", "path must be a string");
    /* a folder may be written src/ or ., the whole workspace "" or / or /workspace/ */
    const char *asked = fileedit_rel_path(json_string_value(p));
    while (!strncmp(asked, "./", 2))
        asked += 2;
    _cleanup_free_ char *path = sbx_xstrdup(asked);
    size_t plen = strlen(path);
    while (plen > 0 && path[plen - 1] == '/')
        path[--plen] = 0;
    if (!strcmp(path, ".") || (p && !strcmp(json_string_value(p), "/")))
        path[0] = 0;
    if (ws_path_check(path, true, err) < 0)
        return sbx_err_ret(err);
    bool remote = sandbox_workspace_remote(c->sb);
    /* resolved beneath the workspace: .. and symlinks out are invalid_path */
    if (*path && !remote) {
        _cleanup_close_ int root = -1;
        struct stat st;
        if (open_root(c, &root, err) < 0 || ws_lstat(root, path, &st, NULL, 0, err) < 0)
            return sbx_err_ret(err);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
            return sbx_err_set(err, EINVAL, "invalid_path", "%.200s is not a file or a folder",
                               path);
    }
    json_t *mr = json_object_get(c->args, "max_results");
    json_int_t max = TOOLS_BSL_RESULTS_DEFAULT;
    if (mr && !json_is_null(mr)) {
        if (!json_is_integer(mr) || json_integer_value(mr) < 1 ||
            json_integer_value(mr) > TOOLS_BSL_RESULTS_MAX)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "max_results must be an integer from 1 to %d",
                               TOOLS_BSL_RESULTS_MAX);
        max = json_integer_value(mr);
    }
    char codes[D_COUNT_ * 40 + 1];
    bool given;
    if (bsl_codes(json_object_get(c->args, "diagnostics"), codes, sizeof(codes), &given,
                  &c->bsl_unsupported, err) < 0)
        return sbx_err_ret(err);
    _cleanup_free_ char *full = sbx_xasprintf("/workspace%s%s", *path ? "/" : "", path);
    _cleanup_free_ char *qpath = sh_quote(full);
    /* codes are [A-Za-z0-9] only, so they need no quoting; '' is none at all */
    /* the report stops whole within the exec's output limit, so it always parses */
    _cleanup_free_ char *cmd =
        sbx_xasprintf(OCI_BSL_PATH " --format json --max-results %lld --max-bytes %u%s%s%s -- %s",
                      (long long)max, EXEC_OUTPUT_MAX - 64u * 1024u,
                      given ? " --diagnostics '" : "", codes, given ? "'" : "", qpath);
    json_t *body = json_pack("{s:s,s:s}", "shell", cmd, "cwd", "/workspace");
    json_t *t = json_object_get(c->args, "timeout_seconds");
    if (t && !json_is_null(t))
        json_object_set(body, "timeout_seconds", t);
    else
        json_object_set_new(body, "timeout_seconds", json_integer(TOOLS_BSL_TIMEOUT_DEFAULT));
    c->body = body;
    if (*path && remote) /* the same check by the agent; then tools_bsl_exec */
        return toolws_bsl_check(c, path, err);
    return start_exec(c, body, err);
}

void tools_bsl_exec(struct tool_call *c)
{
    struct sbx_err err = {0};
    if (start_exec(c, c->body, &err) < 0)
        tools_fail(c, &err);
}

static void bsl_done(struct tool_call *c, const struct exec_result *res)
{
    struct sbx_err e = {0};
    if (res->timed_out) {
        sbx_err_set(&e, ETIMEDOUT, "bsl_check_failed",
                    "sbx-bsl did not finish within its timeout (exec %s)", res->id);
        tools_fail(c, &e);
        return;
    }
    if (res->exit_code == 126 || res->exit_code == 127) {
        sbx_err_set(&e, ENOENT, "bsl_unavailable",
                    "this sandbox has no " OCI_BSL_PATH " (started before sbx-bsl was built, or "
                    "from a template built before it: rebuild the template)");
        tools_fail(c, &e);
        return;
    }
    if (res->out[0].dropped) {
        sbx_err_set(&e, EFBIG, "bsl_check_failed",
                    "the report passed the output limit: ask for fewer max_results");
        tools_fail(c, &e);
        return;
    }
    json_error_t jerr;
    json_t *report =
        res->out[0].len ? json_loadb(res->out[0].buf, res->out[0].len, 0, &jerr) : NULL;
    if (!json_is_object(report)) {
        json_decref(report);
        int n = res->out[1].len > 300 ? 300 : (int)res->out[1].len;
        sbx_err_set(&e, EIO, "bsl_check_failed", "sbx-bsl exited %d: %.*s", res->exit_code,
                    n ? n : 9, n ? res->out[1].buf : "no report");
        tools_fail(c, &e);
        return;
    }
    json_object_set_new(report, "exec_id", json_string(res->id));
    if (c->bsl_unsupported) /* asked for, but not among sbx-bsl's (docs/bsl.md) */
        json_object_set(report, "unsupported_diagnostics", c->bsl_unsupported);
    json_object_set_new(report, "duration_ms", json_integer((json_int_t)res->duration_ms));
    tools_finish(c, report, NULL, NULL);
}

/* ---- the kernel ---- */

static void on_kernel_done(json_t *answer, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    c->krun = NULL;
    tools_finish(c, err ? NULL : json_incref(answer), err, NULL);
}

static const struct kernel_observer kernel_obs = {.on_done = on_kernel_done};

static void on_ready_kernel(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    struct sbx_err e = {0};
    c->wait = WAIT_NONE;
    if (err) {
        tools_fail(c, err);
        return;
    }
    c->kp.who = &c->who;
    c->kp.request_id = c->request_id;
    c->kp.via = "tool";
    if (kernel_run_start(sb, c->d->llm, &c->kp, &kernel_obs, c, &c->krun, &e) < 0) {
        tools_fail(c, &e);
        return;
    }
    c->wait = WAIT_KERNEL;
}

static int run_code(struct tool_call *c, struct sbx_err *err)
{
    static const char *const target[] = {"sandbox_id"};
    json_t *body = args_without(c->args, target, SBX_ARRAY_SIZE(target));
    c->body = body;
    if (kernel_params_parse(body, &c->kp, err) < 0)
        return sbx_err_ret(err);
    c->wait = WAIT_READY;
    sandbox_when_ready(c->sb, on_ready_kernel, c);
    return 0;
}

/* ---- PTY sessions ---- */

static void on_pty_done(json_t *answer, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    c->pty = NULL;
    tools_finish(c, err ? NULL : json_incref(answer), err, NULL);
}

static int run_pty(struct tool_call *c, struct sbx_err *err)
{
    int r;
    struct pty_origin o = {&c->who, c->request_id, "tool"};
    if (c->def->id == TOOL_EXEC_COMMAND)
        r = pty_exec_command(c->sb, &o, c->args, on_pty_done, c, &c->pty, err);
    else
        r = pty_write_stdin(c->sb, &o, arg_string(c, "session_id"), c->args, on_pty_done, c,
                            &c->pty, err);
    if (r == 0)
        c->wait = WAIT_PTY;
    return r;
}

/* ---- files ---- */

static int run_edit(struct tool_call *c, struct sbx_err *err)
{
    _cleanup_close_ int root = -1;
    json_t *out = NULL, *details = NULL;
    if (sandbox_workspace_remote(c->sb))
        return toolws_edit(c, err);
    if (open_root(c, &root, err) < 0)
        return sbx_err_ret(err);
    int r = fileedit_run(root, c->args, &out, &details, err);
    const char *cmd = arg_string(c, "command");
    if (!cmd || strcmp(cmd, "view"))
        audit_record(c->d->store, &c->who, NULL, c->request_id, "file.edit", c->sandbox_id,
                     r < 0 ? err->code : "ok",
                     json_pack("{s:s}", "path", fileedit_rel_path(arg_string(c, "path") ?: "")));
    if (r < 0) {
        tools_finish(c, NULL, err, details);
        return 0;
    }
    tools_finish(c, out, NULL, NULL);
    return 0;
}

int tools_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:I}", "path", e->path, "type",
                                          ws_type_name(e->type), "size", (json_int_t)e->size,
                                          "mtime", (json_int_t)e->mtime));
    return 0;
}

void tools_list_answer(struct tool_call *c, const char *path, json_t *list, bool truncated)
{
    tools_finish(c,
                 json_pack("{s:s,s:o,s:b}", "path", path, "entries", list, "truncated", truncated),
                 NULL, NULL);
}

static int files_list(struct tool_call *c, int root, const char *path, bool recursive,
                      struct sbx_err *err)
{
    bool truncated = false;
    json_t *list = json_array();
    if (ws_walk(root, path, recursive, TOOLS_FILES_LIST_MAX, tools_list_entry, list, &truncated,
                err) < 0) {
        json_decref(list);
        return sbx_err_ret(err);
    }
    tools_list_answer(c, path, list, truncated);
    return 0;
}

void tools_read_large(struct tool_call *c, const char *path, uint64_t size, const char *sha)
{
    json_t *o = json_pack("{s:s,s:I,s:s,s:b,s:o,s:I}", "path", path, "size", (json_int_t)size,
                          "sha256", sha, "inline", 0, "url", tools_file_url(c, path), "inline_max",
                          (json_int_t)TOOLS_READ_INLINE_MAX);
    if (!strncmp(path, ARTIFACTS_DIR "/", sizeof(ARTIFACTS_DIR))) {
        c->link_path = sbx_xstrdup(path); /* a signed link, usable without the key */
        tools_collect_links(c, o);
        return;
    }
    tools_finish(c, o, NULL, NULL);
}

void tools_read_inline(struct tool_call *c, const char *path, const char *buf, size_t len)
{
    json_t *o = json_pack("{s:s,s:I,s:b}", "path", path, "size", (json_int_t)len, "inline", 1);
    if (sbx_utf8_valid(buf, len)) {
        json_object_set_new(o, "content", json_stringn(buf, len));
        json_object_set_new(o, "encoding", json_string("utf-8"));
    } else {
        _cleanup_free_ char *b64 = sbx_base64_encode(buf, len);
        json_object_set_new(o, "content", json_string(b64));
        json_object_set_new(o, "encoding", json_string("base64"));
    }
    tools_finish(c, o, NULL, NULL);
}

static int files_read(struct tool_call *c, int root, const char *path, struct sbx_err *err)
{
    _cleanup_close_ int fd = -1;
    uint64_t size;
    char sha[WS_SHA256_HEX_LEN + 1];
    if (ws_open_file(root, path, &fd, &size, err) < 0)
        return sbx_err_ret(err);
    audit_record(c->d->store, &c->who, NULL, c->request_id, "file.download", c->sandbox_id, "ok",
                 json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)size));
    if (size > TOOLS_READ_INLINE_MAX) {
        uint64_t n;
        if (ws_sha256_fd(fd, -1, sha, &n, err) < 0)
            return sbx_err_ret(err);
        tools_read_large(c, path, n, sha);
        return 0;
    }
    _cleanup_free_ char *buf = sbx_xmalloc(size + 1);
    size_t len = 0;
    int r = sbx_read_upto(fd, buf, size, &len);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    tools_read_inline(c, path, buf, len);
    return 0;
}

/* Standard base64 (padding required) to bytes; invalid_request when it is not that. */
static int base64_decode(const char *in, size_t inlen, char **out, size_t *outlen,
                         struct sbx_err *err)
{
    if (inlen % 4)
        return sbx_err_set(err, EINVAL, "invalid_request", "content is not valid base64");
    char *buf = sbx_xmalloc(inlen / 4 * 3 + 1);
    int n =
        inlen ? EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)in, (int)inlen) : 0;
    if (n < 0) {
        free(buf);
        return sbx_err_set(err, EINVAL, "invalid_request", "content is not valid base64");
    }
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    for (size_t i = inlen; i > 0 && in[i - 1] == '=' && n > 0; i--)
        n--;
    *out = buf;
    *outlen = (size_t)n;
    return 0;
}

/* A write's bytes: content as it is, or decoded (*decoded, to free). */
static int write_content(struct tool_call *c, char **decoded, const char **buf, size_t *len,
                         struct sbx_err *err)
{
    json_t *content = json_object_get(c->args, "content");
    const char *enc = arg_string(c, "encoding");
    if (!json_is_string(content))
        return sbx_err_set(err, EINVAL, "invalid_request", "content must be a string");
    if (enc && strcmp(enc, "utf-8") && strcmp(enc, "base64"))
        return sbx_err_set(err, EINVAL, "invalid_request", "encoding must be utf-8 or base64");
    *buf = json_string_value(content);
    *len = json_string_length(content);
    if (enc && !strcmp(enc, "base64")) {
        if (base64_decode(*buf, *len, decoded, len, err) < 0)
            return sbx_err_ret(err);
        *buf = *decoded;
    }
    return 0;
}

void tools_write_done(struct tool_call *c, const char *path, size_t len, const struct sbx_err *err)
{
    json_t *details = json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len);
    if (sandbox_workspace_remote(c->sb))
        json_object_set_new(details, "via", json_string("agent"));
    audit_record(c->d->store, &c->who, NULL, c->request_id, "file.upload", c->sandbox_id,
                 err ? err->code : "ok", details);
    if (err)
        tools_fail(c, err);
    else
        tools_finish(c, json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len), NULL, NULL);
}

static int run_files(struct tool_call *c, struct sbx_err *err)
{
    const char *op = arg_string(c, "op");
    json_t *p = json_object_get(c->args, "path");
    if (p && !json_is_null(p) && !json_is_string(p))
        return sbx_err_set(err, EINVAL, "invalid_request", "path must be a string");
    const char *path = fileedit_rel_path(json_string_value(p) ?: "");
    if (op && !strcmp(op, "artifacts")) {
        tools_collect_links(c, json_pack("{s:s}", "sandbox_id", c->sandbox_id));
        return 0;
    }
    _cleanup_close_ int root = -1;
    _cleanup_free_ char *decoded = NULL;
    const char *buf = NULL;
    size_t len = 0;
    json_t *rec = json_object_get(c->args, "recursive");
    if (!op || (strcmp(op, "list") && strcmp(op, "read") && strcmp(op, "write")))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "op must be list, read, write or artifacts");
    bool list = !strcmp(op, "list"), write = !strcmp(op, "write");
    if (list && rec && !json_is_null(rec) && !json_is_boolean(rec))
        return sbx_err_set(err, EINVAL, "invalid_request", "recursive must be true or false");
    if ((write && write_content(c, &decoded, &buf, &len, err) < 0) ||
        ws_path_check(path, list, err) < 0)
        return sbx_err_ret(err);
    if (sandbox_workspace_remote(c->sb)) /* through the agent (toolws.c) */
        return list    ? toolws_list(c, path, json_is_true(rec), err)
               : write ? toolws_write(c, path, buf, len, err)
                       : toolws_read(c, path, err);
    if (open_root(c, &root, err) < 0)
        return sbx_err_ret(err);
    if (list)
        return files_list(c, root, path, json_is_true(rec), err);
    if (!write)
        return files_read(c, root, path, err);
    struct sbx_err werr = {0};
    int r = ws_write_file(root, path, buf, len, 0644, &werr);
    tools_write_done(c, path, len, r < 0 ? &werr : NULL);
    return 0;
}

/* ---- pause, resume, fork, preview ---- */

static void on_snap_answer(json_t *answer, const struct sbx_err *err, void *data)
{
    struct tool_call *c = data;
    c->snap = NULL;
    tools_finish(c, err ? NULL : json_incref(answer), err, NULL);
}

static int run_lifecycle(struct tool_call *c, struct sbx_err *err)
{
    static const char *const target[] = {"sandbox_id"};
    struct snap_origin o = {.mgr = c->d->mgr,
                            .jobs = c->d->jobs,
                            .store = c->d->store,
                            .who = &c->who,
                            .request_id = c->request_id};
    json_auto_t *body = args_without(c->args, target, SBX_ARRAY_SIZE(target));
    int r;
    switch (c->def->id) {
    case TOOL_SANDBOX_PAUSE:
        r = snapcall_pause(&o, c->sb, on_snap_answer, c, &c->snap, err);
        break;
    case TOOL_SANDBOX_RESUME:
        r = snapcall_resume(&o, c->sb, on_snap_answer, c, &c->snap, err);
        break;
    case TOOL_SANDBOX_FORK:
        r = snapcall_fork(&o, c->sb, body, on_snap_answer, c, &c->snap, err);
        break;
    default: {
        json_t *out = NULL;
        r = preview_grant(c->d->previews, c->d->store, &c->who, c->request_id, c->sb, body, NULL,
                          &out, err);
        if (r == 0)
            tools_finish(c, out, NULL, NULL);
        return r;
    }
    }
    if (r == 0)
        c->wait = WAIT_SNAP;
    return r;
}

/* ---- dispatch ---- */

static int run(struct tool_call *c, struct sbx_err *err)
{
    switch (c->def->id) {
    case TOOL_SANDBOX_CREATE:
        return run_create(c, err);
    case TOOL_SANDBOX_LIST:
        return run_list(c, err);
    case TOOL_SANDBOX_KILL:
        return run_kill(c, err);
    case TOOL_SANDBOX_EXEC:
        return run_exec(c, err);
    case TOOL_SANDBOX_BASH:
        return run_bash(c, err);
    case TOOL_SANDBOX_RUN_CODE:
    case TOOL_REPL_EXECUTE:
        return run_code(c, err);
    case TOOL_EXEC_COMMAND:
    case TOOL_WRITE_STDIN:
        return run_pty(c, err);
    case TOOL_EDIT_FILE:
        return run_edit(c, err);
    case TOOL_SANDBOX_FILES:
        return run_files(c, err);
    case TOOL_SANDBOX_PAUSE:
    case TOOL_SANDBOX_RESUME:
    case TOOL_SANDBOX_FORK:
    case TOOL_SANDBOX_PREVIEW:
        return run_lifecycle(c, err);
    case TOOL_BSL_CHECK:
        return run_bsl(c, err);
    }
    return sbx_err_set(err, ENOENT, "tool_not_found", "no such tool");
}

void tools_call(struct sbxd *d, const struct tool_request *rq, tool_done_fn cb, void *data,
                struct tool_call **out)
{
    struct tool_call *c = sbx_xcalloc(1, sizeof(*c));
    struct sbx_err err = {0};
    *out = c;
    c->d = d;
    c->cb = cb;
    c->data = data;
    c->who = *rq->who;
    snprintf(c->request_id, sizeof(c->request_id), "%s", rq->request_id ? rq->request_id : "");
    c->def = tools_find(rq->name);
    c->args = rq->args ? json_deep_copy(rq->args) : json_object();
    int r = 0;
    if (!c->def)
        r = sbx_err_set(&err, ENOENT, "tool_not_found", "no tool named %.64s",
                        rq->name ? rq->name : "");
    else if (!json_is_object(c->args))
        r = sbx_err_set(&err, EINVAL, "invalid_request", "the arguments must be an object");
    if (r == 0 && c->def->needs_sandbox) {
        json_t *id = json_object_get(c->args, "sandbox_id");
        const char *sid = rq->sandbox_id ? rq->sandbox_id : json_string_value(id);
        if (rq->sandbox_id && id && !json_is_null(id) &&
            (!json_is_string(id) || strcmp(json_string_value(id), rq->sandbox_id)))
            r = sbx_err_set(&err, EINVAL, "invalid_request",
                            "sandbox_id in the arguments differs from the path's");
        else if (!sid)
            r = sbx_err_set(&err, EINVAL, "invalid_request", "sandbox_id must be a string");
        else
            r = manager_lookup(d->mgr, &c->who, sid, &c->sb, &err);
        if (r == 0)
            snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", c->sb->rec.id);
    }
    if (r == 0)
        r = run(c, &err);
    if (r < 0)
        tools_fail(c, &err);
}
