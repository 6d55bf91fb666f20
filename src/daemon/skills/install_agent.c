#include "install_agent.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../exec/exec.h"
#include "../live/llm.h"
#include "../sandbox/manager.h"

static const char system_prompt[] =
    "You install an Agent Skill in a Linux sandbox (Debian). You act only through shell "
    "commands, one at a time, and see each one's exit code and the end of its output. Reply "
    "with exactly one JSON object and nothing else: {\"command\": \"<one shell command>\"} to "
    "run a command, {\"done\": \"<what is installed>\"} once the skill is installed, or "
    "{\"failed\": \"<why>\"} when it cannot be.";

struct install_agent {
    struct llm *llm;
    struct manager *mgr;
    struct auth_identity who;
    char sandbox_id[STORE_ID_MAX + 1];
    char *name, *section, *instructions;
    json_t *env;
    const struct install_agent_host *h;
    void *data;
    json_t *history; /* [{command, exit_code, timed_out, output}] */
    int steps, bad;
    struct llm_call *call;
    struct exec_run *exec;
    char *command;
    char tail[INSTALL_AGENT_OUTPUT_TAIL];
    size_t tail_len;
};

static char *dup_n(const char *p, size_t n)
{
    return sbx_xasprintf("%.*s", (int)n, p);
}

static bool heading(const char *line, size_t len, int *level)
{
    int n = 0;
    while ((size_t)n < len && line[n] == '#')
        n++;
    if (n == 0 || n > 6 || (size_t)n >= len || line[n] != ' ')
        return false;
    *level = n;
    return true;
}

char *install_agent_section(const char *md, size_t len)
{
    const char *end = md + len, *start = NULL;
    int level = 0;
    for (const char *p = md; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        int lv;
        if (heading(p, n, &lv)) {
            if (start && lv <= level)
                return dup_n(start, (size_t)(p - start) > INSTALL_AGENT_SECTION_MAX
                                        ? INSTALL_AGENT_SECTION_MAX
                                        : (size_t)(p - start));
            _cleanup_free_ char *h = dup_n(p, n);
            if (!start && strcasestr(h, "install")) {
                start = p;
                level = lv;
            }
        }
        p = nl ? nl + 1 : end;
    }
    if (!start)
        return NULL;
    size_t n = (size_t)(end - start);
    return dup_n(start, n > INSTALL_AGENT_SECTION_MAX ? INSTALL_AGENT_SECTION_MAX : n);
}

static void agent_free(struct install_agent *a)
{
    free(a->name);
    free(a->section);
    free(a->instructions);
    free(a->command);
    json_decref(a->env);
    json_decref(a->history);
    free(a);
}

static void finish(struct install_agent *a, bool ok, const char *why)
{
    const struct install_agent_host *h = a->h;
    void *data = a->data;
    agent_free(a);
    h->done(data, ok, why);
}

static char *prompt(struct install_agent *a)
{
    /* The oldest steps go first when the history grows past its bound. */
    _cleanup_free_ char *hist = NULL;
    for (;;) {
        free(hist);
        hist = sbx_xstrdup("");
        size_t i;
        json_t *s;
        json_array_foreach(a->history, i, s)
        {
            char *next =
                sbx_xasprintf("%s$ %s\n(exit code %lld%s)\n%s\n", hist,
                              json_string_value(json_object_get(s, "command")),
                              (long long)json_integer_value(json_object_get(s, "exit_code")),
                              json_is_true(json_object_get(s, "timed_out")) ? ", timed out" : "",
                              json_string_value(json_object_get(s, "output")));
            free(hist);
            hist = next;
        }
        if (strlen(hist) <= INSTALL_AGENT_HISTORY_MAX || json_array_size(a->history) <= 1)
            break;
        json_array_remove(a->history, 0);
    }
    _cleanup_free_ char *guide = sbx_xstrdup("");
    json_t *g = a->h->guidance(a->data);
    size_t i;
    json_t *m;
    json_array_foreach(g, i, m)
    {
        char *next = sbx_xasprintf("%s- %s\n", guide, json_string_value(m));
        free(guide);
        guide = next;
    }
    json_decref(g);
    return sbx_xasprintf(
        "Install the skill \"%s\". Its files are in /workspace/skills/%s, the working "
        "directory of every command.\n\nIts install section:\n%s\n\n%s%s%s%s%s"
        "Commands so far:\n%s\nReply with one JSON object.",
        a->name, a->name, a->section, a->instructions ? "Instructions from the admin:\n" : "",
        a->instructions ? a->instructions : "", a->instructions ? "\n\n" : "",
        guide[0] ? "Guidance from the admin (newest last):\n" : "", guide,
        hist[0] ? hist : "(none yet)\n");
}

static void on_reply(const char *text, const struct sbx_err *err, void *data);

static int query(struct install_agent *a, struct sbx_err *err)
{
    _cleanup_free_ char *p = prompt(a);
    json_t *req = json_pack("{s:s,s:s}", "prompt", p, "system", system_prompt);
    int r = llm_query(a->llm, req, on_reply, a, &a->call, err);
    json_decref(req);
    return r;
}

static void ask(struct install_agent *a)
{
    struct sbx_err err = {0};
    if (query(a, &err) < 0) {
        _cleanup_free_ char *why = sbx_xasprintf("the install agent: %s", err.msg);
        finish(a, false, why);
    }
}

static void on_output(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct install_agent *a = data;
    a->h->output(a->data, ch, buf, len);
    if (len >= sizeof(a->tail)) {
        memcpy(a->tail, buf + len - sizeof(a->tail), sizeof(a->tail));
        a->tail_len = sizeof(a->tail);
        return;
    }
    if (a->tail_len + len > sizeof(a->tail)) {
        size_t drop = a->tail_len + len - sizeof(a->tail);
        memmove(a->tail, a->tail + drop, a->tail_len - drop);
        a->tail_len -= drop;
    }
    memcpy(a->tail + a->tail_len, buf, len);
    a->tail_len += len;
}

static void on_exec_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct install_agent *a = data;
    a->exec = NULL;
    if (err) {
        _cleanup_free_ char *why = sbx_xasprintf("the install agent's command: %s", err->msg);
        finish(a, false, why);
        return;
    }
    _cleanup_free_ char *tail = sbx_xmalloc(a->tail_len + 1);
    for (size_t i = 0; i < a->tail_len; i++) /* what is not text is not for the prompt */
        tail[i] = (unsigned char)a->tail[i] >= 0x80 || !a->tail[i] ? '?' : a->tail[i];
    tail[a->tail_len] = '\0';
    json_array_append_new(a->history,
                          json_pack("{s:s,s:i,s:b,s:s}", "command", a->command, "exit_code",
                                    res->exit_code, "timed_out", res->timed_out, "output", tail));
    a->h->note(a->data, "exit",
               res->timed_out ? "the command timed out"
                              : (res->exit_code ? "exit code != 0" : "exit code 0"));
    ask(a);
}

static const struct exec_observer exec_obs = {.on_output = on_output, .on_done = on_exec_done};

static void run(struct install_agent *a, const char *command)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    free(a->command);
    a->command = sbx_xstrdup(command);
    a->tail_len = 0;
    a->steps++;
    _cleanup_free_ char *cwd = sbx_xasprintf("/workspace/skills/%s", a->name);
    struct exec_params p = {
        .argv = json_pack("[s,s,s]", "/bin/sh", "-c", command),
        .env = a->env,
        .cwd = cwd,
        .timeout_s = INSTALL_AGENT_COMMAND_TIMEOUT_S,
        .command = command,
        .language = "shell",
        .cwd_given = true,
        .timeout_given = true,
    };
    struct exec_origin o = {.who = &a->who, .request_id = "skill-install", .action = "exec"};
    int r = manager_lookup(a->mgr, &a->who, a->sandbox_id, &sb, &err);
    if (r == 0)
        r = exec_start(sb, &p, &o, &exec_obs, a, &a->exec, &err);
    exec_params_clear(&p);
    if (r < 0) {
        _cleanup_free_ char *why = sbx_xasprintf("the install agent's command: %s", err.msg);
        finish(a, false, why);
    }
}

/* The model's answer: the first {...} in it. */
static json_t *parse_reply(const char *text)
{
    const char *open = strchr(text, '{'), *close = strrchr(text, '}');
    if (!open || !close || close < open)
        return NULL;
    json_t *j = json_loadb(open, (size_t)(close - open + 1), 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static void on_reply(const char *text, const struct sbx_err *err, void *data)
{
    struct install_agent *a = data;
    a->call = NULL;
    if (err) {
        _cleanup_free_ char *why = sbx_xasprintf("the install agent: %s", err->msg);
        finish(a, false, why);
        return;
    }
    a->h->note(a->data, "agent", text);
    json_t *j = parse_reply(text);
    const char *command = json_string_value(json_object_get(j, "command"));
    const char *done = json_string_value(json_object_get(j, "done"));
    const char *failed = json_string_value(json_object_get(j, "failed"));
    if (command && *command && strlen(command) <= EXEC_CODE_MAX &&
        a->steps < INSTALL_AGENT_STEPS_MAX) {
        run(a, command);
    } else if (command && *command && a->steps >= INSTALL_AGENT_STEPS_MAX) {
        _cleanup_free_ char *why = sbx_xasprintf("the install agent did not finish in %d commands",
                                                 INSTALL_AGENT_STEPS_MAX);
        finish(a, false, why);
    } else if (done) {
        finish(a, true, NULL);
    } else if (failed) {
        size_t n = strlen(failed) > 500 ? sbx_utf8_prefix(failed, 500) : strlen(failed);
        _cleanup_free_ char *why = sbx_xasprintf("the install agent gave up: %.*s", (int)n, failed);
        finish(a, false, why);
    } else if (++a->bad >= INSTALL_AGENT_BAD_REPLIES_MAX) {
        finish(a, false, "the install agent's model does not answer with the JSON it is asked for");
    } else {
        json_array_append_new(a->history,
                              json_pack("{s:s,s:i,s:b,s:s}", "command", "(no command)", "exit_code",
                                        -1, "timed_out", 0, "output",
                                        "that reply was not one of the JSON objects asked for"));
        ask(a);
    }
    json_decref(j);
}

int install_agent_start(const struct install_agent_params *p, const struct install_agent_host *h,
                        void *data, struct install_agent **out, struct sbx_err *err)
{
    struct install_agent *a = sbx_xcalloc(1, sizeof(*a));
    a->llm = p->llm;
    a->mgr = p->mgr;
    a->who = *p->who;
    snprintf(a->sandbox_id, sizeof(a->sandbox_id), "%s", p->sandbox_id);
    a->name = sbx_xstrdup(p->name);
    a->section = sbx_xstrdup(p->section);
    a->instructions = p->instructions && *p->instructions ? sbx_xstrdup(p->instructions) : NULL;
    a->env = json_deep_copy(p->env);
    a->h = h;
    a->data = data;
    a->history = json_array();
    struct sbx_err e = {0};
    if (query(a, &e) < 0) {
        agent_free(a);
        return sbx_err_set(err, EIO, e.code, "the install agent: %s", e.msg);
    }
    *out = a;
    return 0;
}

void install_agent_stop(struct install_agent *a)
{
    if (!a)
        return;
    if (a->call)
        llm_cancel(a->call);
    if (a->exec) {
        exec_kill(a->exec);
        exec_abandon(a->exec);
    }
    agent_free(a);
}
