/* What every command uses: the client from the configuration, errors and exit codes,
 * JSON output, option parsing, the progress bar. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "config.h"
#include "fmt.h"

volatile int cli_interrupted;

struct sbx_client *cli_api(struct cli *cli)
{
    if (cli->api)
        return cli->api;
    struct cli_config cfg;
    struct sbx_err err = {0};
    if (cli_config_load(&cfg, &err) < 0) {
        cli_error("%s", err.msg);
        return NULL;
    }
    if (!cfg.key)
        fprintf(stderr, "sbx: no API key: set SBX_API_KEY or run `sbx login`\n");
    cli->api = sbx_client_new(cfg.url, cfg.key);
    cli_config_release(&cfg);
    if (!cli->api)
        cli_error("cannot set up the HTTP client");
    return cli->api;
}

static void say(const char *fmt, va_list ap)
{
    fputs("sbx: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_usage(struct cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    if (cli->cmd)
        fprintf(stderr, "usage: sbx %s %s\n(see `sbx help %s`)\n", cli->cmd->name, cli->cmd->args,
                cli->cmd->name);
    else
        fprintf(stderr, "(see `sbx help`)\n");
    return CLI_USAGE;
}

int cli_fail(struct cli *cli, const struct sbx_err *err)
{
    if (err->errnum == SBX_E_API) {
        const char *rid = cli->api ? sbx_client_request_id(cli->api) : "";
        fprintf(stderr, "sbx: error %s: %s", err->code, err->msg);
        if (cli->api && sbx_client_status(cli->api))
            fprintf(stderr, " (HTTP %ld", sbx_client_status(cli->api));
        if (*rid)
            fprintf(stderr, ", request %s", rid);
        if (cli->api && sbx_client_status(cli->api))
            fputc(')', stderr);
        fputc('\n', stderr);
        return CLI_API;
    }
    if (err->errnum == SBX_E_CONN) {
        fprintf(stderr, "sbx: cannot reach the server: %s\n", err->msg);
        return CLI_CONN;
    }
    fprintf(stderr, "sbx: %s\n", err->msg);
    return CLI_FAIL;
}

void cli_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s)
        puts(s);
    free(s);
}

int cli_call(struct cli *cli, const char *method, const char *path, json_t *body, json_t **out)
{
    if (out)
        *out = NULL;
    struct sbx_client *c = cli_api(cli);
    if (!c)
        return CLI_FAIL;
    struct sbx_err err = {0};
    json_t *ans = NULL;
    if (sbx_call(c, method, path, body, &ans, &err) < 0)
        return cli_fail(cli, &err);
    if (cli->json && ans)
        cli_print_json(ans);
    if (out)
        *out = ans;
    else
        json_decref(ans);
    return CLI_OK;
}

int cli_getopt(struct cli *cli, int argc, char **argv, const char *shortopts, const void *longopts)
{
    opterr = 0;
    int idx = 0;
    int o = getopt_long(argc, argv, shortopts, longopts, &idx);
    if (o == '?') {
        if (optopt)
            cli_usage(cli, "option -%c %s", optopt,
                      strchr(shortopts, optopt) ? "needs a value" : "is unknown");
        else
            cli_usage(cli, "unknown option or missing value: %s", argv[optind - 1]);
    } else if (o == ':') {
        cli_usage(cli, "option %s needs a value", argv[optind - 1]);
        o = '?';
    }
    return o;
}

bool cli_nargs(struct cli *cli, int argc, int min, int max)
{
    if (argc < min) {
        cli_usage(cli, "missing argument");
        return false;
    }
    if (max >= 0 && argc > max) {
        cli_usage(cli, "too many arguments");
        return false;
    }
    return true;
}

void cli_help_cmd(const struct cli_cmd *cmd, FILE *f)
{
    fprintf(f, "usage: sbx %s %s\n\n%s\n", cmd->name, cmd->args, cmd->summary);
    if (cmd->help && *cmd->help)
        fprintf(f, "\n%s", cmd->help);
    fprintf(f, "\n  --json            print the API's JSON answer\n");
}

void cli_progress_init(struct cli_progress *p, const char *label)
{
    memset(p, 0, sizeof(*p));
    p->label = label;
    p->on = isatty(STDERR_FILENO);
}

int cli_progress_tick(void *ud, long long done, long long total)
{
    struct cli_progress *p = ud;
    if (cli_interrupted)
        return 1;
    if (!p || !p->on || total < CLI_PROGRESS_MIN)
        return 0;
    long long now = sbx_now_ms();
    if (p->shown && now - p->last_ms < 100 && done < total)
        return 0;
    p->last_ms = now;
    p->shown = true;
    int pct = total ? (int)(done * 100 / total) : 0;
    int bar = pct * 30 / 100;
    char d[32], t[32];
    fmt_bytes(done, d, sizeof(d));
    fmt_bytes(total, t, sizeof(t));
    fprintf(stderr, "\r%-24.24s [%.*s%*s] %3d%% %s / %s\033[K", p->label, bar,
            "##############################", 30 - bar, "", pct, d, t);
    fflush(stderr);
    return 0;
}

void cli_progress_end(struct cli_progress *p)
{
    if (p->shown) {
        fputc('\n', stderr);
        p->shown = false;
    }
}

static void on_sigint(int sig)
{
    cli_interrupted = 1;
}

void cli_catch_sigint(bool on)
{
    struct sigaction sa = {0};
    sa.sa_handler = on ? on_sigint : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    cli_interrupted = 0;
}

char *cli_sb_path(const char *id, const char *suffix)
{
    _cleanup_free_ char *e = sbx_escape(id);
    return sbx_xasprintf("/v1/sandboxes/%s%s", e, suffix ? suffix : "");
}

const char *cli_field(json_t *obj, const char *name, char *buf, size_t n)
{
    json_t *v = json_object_get(obj, name);
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
    else
        return NULL;
    return buf;
}

const char *cli_when(json_t *obj, const char *name, char *buf, size_t n)
{
    json_t *v = json_object_get(obj, name);
    if (!json_is_integer(v))
        return NULL;
    fmt_reltime(time(NULL), json_integer_value(v), buf, n);
    return buf;
}
