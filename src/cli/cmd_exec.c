/* Running commands: exec (streamed live), run (a file in a fresh sandbox), logs. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "fmt.h"
#include "sandbox_opts.h"

/* Streamed output goes to our own stdout and stderr as it arrives. */
struct out_state {
    struct cli *cli;
    int exit_code;
    bool exited;
    bool failed; /* an error event: the command could not run to an end */
    json_t *error;
};

/* A chunk's bytes: text as it is, base64 decoded when the chunk says so. */
static void write_chunk(int fd, json_t *ev)
{
    const char *data = json_string_value(json_object_get(ev, "data"));
    if (!data)
        return;
    size_t len = json_string_length(json_object_get(ev, "data"));
    const char *enc = json_string_value(json_object_get(ev, "encoding"));
    if (enc && !strcmp(enc, "base64")) {
        _cleanup_free_ unsigned char *raw = sbx_xmalloc(len / 4 * 3 + 4);
        int n = EVP_DecodeBlock(raw, (const unsigned char *)data, (int)len);
        if (n < 0)
            return;
        /* EVP_DecodeBlock counts the padding as bytes. */
        while (len && data[len - 1] == '=' && n > 0)
            len--, n--;
        (void)sbx_write_all(fd, raw, (size_t)n);
        return;
    }
    (void)sbx_write_all(fd, data, len);
}

static int on_output(void *ud, json_t *ev)
{
    struct out_state *st = ud;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        return 0;
    if (!strcmp(type, "stdout"))
        write_chunk(STDOUT_FILENO, ev);
    else if (!strcmp(type, "stderr"))
        write_chunk(STDERR_FILENO, ev);
    else if (!strcmp(type, "truncated"))
        fprintf(stderr, "sbx: %s truncated: the server keeps the first %lld bytes of a stream\n",
                json_string_value(json_object_get(ev, "stream")),
                (long long)json_integer_value(json_object_get(ev, "limit_bytes")));
    else if (!strcmp(type, "exit") || !strcmp(type, "error")) {
        json_t *code = json_object_get(ev, "exit_code");
        if (json_is_integer(code)) {
            st->exit_code = (int)json_integer_value(code);
            st->exited = true;
        }
        if (json_is_true(json_object_get(ev, "timed_out")))
            fprintf(stderr, "sbx: the command timed out and was killed\n");
        if (!strcmp(type, "error")) {
            st->failed = !st->exited;
            fprintf(stderr, "sbx: error %s: %s (request %s)\n",
                    json_string_value(json_object_get(ev, "code")),
                    json_string_value(json_object_get(ev, "message")),
                    sbx_client_request_id(st->cli->api));
        }
        return 1;
    }
    return 0;
}

static int stream_tick(void *ud, long long done, long long total)
{
    return cli_interrupted;
}

/* Stream a command's output; returns the command's exit code or a CLI_* code. */
static int stream_exec(struct cli *cli, const char *path, json_t *body)
{
    if (cli->json) {
        /* Scripts get the blocking answer, whole. */
        json_t *ans = NULL;
        int rc = cli_call(cli, "POST", path, body, &ans);
        if (rc == CLI_OK)
            rc = (int)json_integer_value(json_object_get(ans, "exit_code"));
        json_decref(ans);
        return rc;
    }
    struct sbx_client *c = cli_api(cli);
    if (!c)
        return CLI_FAIL;
    struct out_state st = {.cli = cli};
    struct sbx_stream_opts opts = {.on_event = on_output, .on_tick = stream_tick, .ud = &st};
    struct sbx_err err = {0};
    if (sbx_stream(c, "POST", path, body, &opts, &err) < 0) {
        if (!strcmp(err.code, "cancelled"))
            return 130;
        return cli_fail(cli, &err);
    }
    if (st.exited)
        return st.exit_code;
    if (!st.failed)
        fprintf(stderr, "sbx: the stream ended before the command's exit\n");
    return CLI_API;
}

/* argv of a command: one word is a shell line as it is; several are quoted one by one,
 * so the command gets exactly these arguments. */
static char *shell_line(int argc, char **argv)
{
    if (argc == 1)
        return sbx_xstrdup(argv[0]);
    size_t cap = 1;
    for (int i = 0; i < argc; i++)
        cap += strlen(argv[i]) * 4 + 3;
    char *s = sbx_xmalloc(cap), *p = s;
    for (int i = 0; i < argc; i++) {
        if (i)
            *p++ = ' ';
        *p++ = '\'';
        for (const char *q = argv[i]; *q; q++) {
            if (*q == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *q;
            }
        }
        *p++ = '\'';
    }
    *p = '\0';
    return s;
}

/* A request body is at most 1 MiB (docs/api-contract.md), so is a file sent as code. */
#define RUN_FILE_MAX (1024 * 1024)

enum { OPT_CWD = OPT_CMD_BASE, OPT_TIMEOUT, OPT_SESSION };

/* The exec options (cwd, timeout, env, session) into body. */
static int exec_opt(struct cli *cli, json_t *body, int o, const char *arg)
{
    long long v;
    switch (o) {
    case OPT_CWD:
        json_object_set_new(body, "cwd", json_string(arg));
        return CLI_OK;
    case OPT_TIMEOUT:
        if (!parse_duration(arg, &v) || v < 1)
            return cli_usage(cli, "--timeout: not a duration: %s", arg);
        json_object_set_new(body, "timeout_seconds", json_integer(v));
        return CLI_OK;
    case OPT_SESSION:
        json_object_set_new(body, "session_id", json_string(arg));
        return CLI_OK;
    }
    return CLI_USAGE;
}

static int cmd_exec(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"env", required_argument, NULL, 'e'},
                                             {"cwd", required_argument, NULL, OPT_CWD},
                                             {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                             {"session", required_argument, NULL, OPT_SESSION},
                                             {0}};
    json_t *body = json_object();
    struct egress_opts unused = {0};
    /* Options may come before and after the ID; the command starts at the first word
     * that is not an option (or after `--`). */
    int rc = CLI_OK, o, id = -1;
    for (int pass = 0; pass < 2 && rc == CLI_OK; pass++) {
        int base = pass ? id : 0;
        optind = 0;
        while (rc == CLI_OK &&
               (o = cli_getopt(cli, argc - base, argv + base, "+e:", longopts)) != -1) {
            if (o == '?')
                rc = CLI_USAGE;
            else if (o == 'e')
                rc = cli_sandbox_opt(cli, body, &unused, o, optarg);
            else
                rc = exec_opt(cli, body, o, optarg);
        }
        if (rc != CLI_OK)
            break;
        if (!pass && base + optind >= argc)
            rc = cli_usage(cli, "missing the sandbox id");
        if (!pass)
            id = base + optind;
        else
            optind += base;
    }
    /* getopt stops after a `--` and skips it. */
    int first = optind;
    if (rc == CLI_OK && first >= argc)
        rc = cli_usage(cli, "missing the command");
    if (rc != CLI_OK) {
        json_decref(body);
        return rc;
    }
    _cleanup_free_ char *line = shell_line(argc - first, argv + first);
    json_object_set_new(body, "shell", json_string(line));
    _cleanup_free_ char *path = cli_sb_path(argv[id], "/exec");
    cli_catch_sigint(true);
    rc = stream_exec(cli, path, body);
    cli_catch_sigint(false);
    json_decref(body);
    return rc;
}

static int cmd_run(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {SANDBOX_LONGOPTS,
                                             {"language", required_argument, NULL, 'l'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"cwd", required_argument, NULL, OPT_CWD},
                                             {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                             {0}};
    json_t *sbody = json_object(), *ebody = json_object();
    struct egress_opts e = {0};
    const char *lang = NULL, *outdir = NULL;
    int o, rc = CLI_OK;
    while (rc == CLI_OK &&
           (o = cli_getopt(cli, argc, argv, SANDBOX_SHORTOPTS "l:o:", longopts)) != -1) {
        if (o == '?')
            rc = CLI_USAGE;
        else if (o == 'l')
            lang = optarg;
        else if (o == 'o')
            outdir = optarg;
        else if (o == OPT_CWD || o == OPT_TIMEOUT)
            rc = exec_opt(cli, ebody, o, optarg);
        else
            rc = cli_sandbox_opt(cli, sbody, &e, o, optarg);
    }
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 1, 1))
        rc = CLI_USAGE;
    const char *file = rc == CLI_OK ? argv[optind] : NULL;
    if (rc == CLI_OK && !lang && !(lang = lang_from_path(file)))
        rc = cli_usage(cli, "cannot tell the language of %s from its extension: use -l", file);
    _cleanup_free_ char *code = NULL;
    size_t len = 0;
    if (rc == CLI_OK) {
        int r = sbx_read_file(file, RUN_FILE_MAX, &code, &len);
        if (r < 0)
            rc = cli_error("%s: %s", file,
                           r == -EFBIG ? "too big to send as code (1 MiB at most)" : strerror(-r));
    }
    json_t *pol = cli_egress_policy(&e), *sb = NULL;
    if (pol)
        json_object_set_new(sbody, "egress", pol);
    /* With --json, the one document printed is the exec's answer (its receipt lists the
     * outputs); the sandbox and the artifact listing stay quiet. */
    bool json = cli->json;
    cli->json = false;
    if (rc == CLI_OK)
        rc = cli_call(cli, "POST", "/v1/sandboxes", sbody, &sb);
    const char *id = json_string_value(json_object_get(sb, "id"));
    if (rc == CLI_OK) {
        json_object_set_new(ebody, "language", json_string(lang));
        json_object_set_new(ebody, "code", json_stringn(code, len));
        _cleanup_free_ char *path = cli_sb_path(id, "/exec");
        cli_catch_sigint(true);
        cli->json = json;
        rc = stream_exec(cli, path, ebody);
        if (outdir && !cli_interrupted) {
            int r = cli_download_artifacts(cli, id, outdir, false);
            if (r != CLI_OK && rc == 0)
                rc = r;
        }
        cli_catch_sigint(false);
        /* Always destroy what we created, also after a failure or ^C. */
        _cleanup_free_ char *sbp = cli_sb_path(id, NULL);
        struct sbx_err err = {0};
        if (sbx_call(cli_api(cli), "DELETE", sbp, NULL, NULL, &err) < 0)
            fprintf(stderr, "sbx: could not destroy %s: %s\n", id, err.msg);
    }
    cli->json = json;
    json_decref(sb);
    json_decref(sbody);
    json_decref(ebody);
    json_decref(e.domains);
    return rc;
}

static int cmd_logs(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"follow", no_argument, NULL, 'f'}, {0}};
    bool follow = false;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "f", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        follow = true;
    }
    if (!cli_nargs(cli, argc - optind, 2, 2))
        return CLI_USAGE;
    _cleanup_free_ char *proc = sbx_escape(argv[optind + 1]);
    _cleanup_free_ char *suffix = sbx_xasprintf("/processes/%s/logs", proc);
    _cleanup_free_ char *path = cli_sb_path(argv[optind], suffix);
    if (!follow || cli->json) {
        json_t *ans = NULL;
        int rc = cli_call(cli, "GET", path, NULL, &ans);
        if (rc == CLI_OK && !cli->json) {
            json_t *ev = json_pack("{s:O?}", "data", json_object_get(ans, "stdout"));
            if (json_is_string(json_object_get(ans, "stdout_encoding")))
                json_object_set(ev, "encoding", json_object_get(ans, "stdout_encoding"));
            write_chunk(STDOUT_FILENO, ev);
            json_decref(ev);
            ev = json_pack("{s:O?}", "data", json_object_get(ans, "stderr"));
            if (json_is_string(json_object_get(ans, "stderr_encoding")))
                json_object_set(ev, "encoding", json_object_get(ans, "stderr_encoding"));
            write_chunk(STDERR_FILENO, ev);
            json_decref(ev);
            if (json_is_true(json_object_get(ans, "stdout_truncated")) ||
                json_is_true(json_object_get(ans, "stderr_truncated")))
                fprintf(stderr, "sbx: the oldest output is no longer kept\n");
        }
        json_decref(ans);
        return rc;
    }
    struct sbx_client *c = cli_api(cli);
    if (!c)
        return CLI_FAIL;
    struct out_state st = {.cli = cli};
    struct sbx_stream_opts opts = {.on_event = on_output, .on_tick = stream_tick, .ud = &st};
    struct sbx_err err = {0};
    cli_catch_sigint(true);
    int r = sbx_stream(c, "GET", path, NULL, &opts, &err);
    cli_catch_sigint(false);
    if (r < 0)
        return !strcmp(err.code, "cancelled") ? CLI_OK : cli_fail(cli, &err);
    return st.failed ? CLI_API : CLI_OK;
}

static const struct cli_cmd cmds[] = {
    {"exec", "ID [OPTIONS] [--] CMD...",
     "run a command in a sandbox, its output live; exits with its code",
     "  -e, --env NAME=VALUE  environment variable (repeatable)\n"
     "      --cwd DIR         working directory (default /workspace)\n"
     "      --timeout DUR     kill it after this long (default 15m)\n"
     "      --session ID      run in this session (default: the sandbox's default)\n"
     "One word is run as a shell line (`sbx exec ID 'ls | wc -l'`); several words are\n"
     "quoted one by one, so the command gets exactly these arguments. sbx takes\n"
     "--json for itself anywhere before a `--`: put `--` before a command that has its own.\n"
     "^C stops following (exit 130); the command runs on in the sandbox.\n",
     cmd_exec},
    {"run", "FILE [-l LANG] [-o DIR] [OPTIONS]",
     "run a file in a fresh sandbox, then destroy it; exits with its code",
     "  -l, --language LANG   python, bash or node (default: from the extension)\n"
     "  -o, --output DIR      download the artifacts (/workspace/out) into DIR,\n"
     "                        checking each one's SHA-256\n"
     "      --cwd DIR, --timeout DUR   as for exec\n" SANDBOX_HELP,
     cmd_run},
    {"logs", "ID PROC [-f]", "a background process's output",
     "  -f, --follow  keep printing until the process exits\n", cmd_logs},
};

const struct cli_group cli_exec_cmds = CLI_GROUP("Commands", cmds);
