/* Account and administration: login, keys (admin), audit. */
#include <getopt.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "config.h"
#include "fmt.h"

#define LOGIN_KEY_MAX 512

/* A line from stdin, without echo when it is a terminal. */
static bool read_secret(const char *prompt, char *buf, size_t n)
{
    bool tty = isatty(STDIN_FILENO);
    struct termios old, quiet;
    if (tty) {
        /* Echo goes off before the prompt shows, so nothing typed after it is echoed. */
        tcgetattr(STDIN_FILENO, &old);
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSADRAIN, &quiet);
        fputs(prompt, stderr);
    }
    bool ok = fgets(buf, (int)n, stdin) != NULL;
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &old);
        fputc('\n', stderr);
    }
    if (ok)
        buf[strcspn(buf, "\r\n")] = '\0';
    return ok && *buf;
}

static int cmd_login(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'}, {"key-stdin", no_argument, NULL, 'k'}, {0}};
    const char *url = NULL;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "u:", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        if (o == 'u')
            url = optarg;
    }
    if (!cli_nargs(cli, argc - optind, 0, 0))
        return CLI_USAGE;
    struct cli_config cfg;
    struct sbx_err err = {0};
    /* Keep what is configured unless told otherwise; a bad config file is replaced. */
    if (cli_config_load(&cfg, &err) < 0)
        cfg = (struct cli_config){.url = sbx_xstrdup(CLI_DEFAULT_URL)};
    if (!url)
        url = cfg.url;
    char key[LOGIN_KEY_MAX];
    const char *env = getenv("SBX_API_KEY");
    if (env && *env)
        snprintf(key, sizeof(key), "%s", env);
    else if (!read_secret("API key: ", key, sizeof(key))) {
        cli_config_release(&cfg);
        return cli_usage(cli, "no key given (type it, pipe it in, or set SBX_API_KEY)");
    }
    /* Check the key before saving it: any valid key may read its own audit trail. */
    struct sbx_client *c = sbx_client_new(url, key);
    int rc = c ? CLI_OK : CLI_FAIL;
    if (c && sbx_call(c, "GET", "/v1/audit?limit=1", NULL, NULL, &err) < 0) {
        cli->api = c;
        rc = cli_fail(cli, &err);
        c = NULL;
    }
    if (rc == CLI_OK && cli_config_save(url, key, &err) < 0)
        rc = cli_error("%s", err.msg);
    if (rc == CLI_OK && !cli->json) {
        _cleanup_free_ char *path = cli_config_path();
        printf("logged in to %s; saved to %s\n", url, path);
    }
    memset(key, 0, sizeof(key));
    sbx_client_free(c);
    cli_config_release(&cfg);
    return rc;
}

static int keys_ls(struct cli *cli)
{
    json_t *ans = NULL;
    int rc = cli_call(cli, "GET", "/v1/keys", NULL, &ans);
    if (rc == CLI_OK && !cli->json) {
        static const char *const head[] = {"ID", "USER", "ROLE", "TOOL_LEVEL", "CREATED"};
        struct fmt_table t;
        fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
        size_t i;
        json_t *k;
        json_array_foreach(json_object_get(ans, "data"), i, k)
        {
            char when[32];
            const char *row[] = {json_string_value(json_object_get(k, "id")),
                                 json_string_value(json_object_get(k, "user")),
                                 json_string_value(json_object_get(k, "role")),
                                 json_string_value(json_object_get(k, "tool_level")),
                                 cli_when(k, "created_at", when, sizeof(when))};
            fmt_table_add(&t, row);
        }
        fmt_table_print(&t, stdout);
        fmt_table_release(&t);
    }
    json_decref(ans);
    return rc;
}

static int cmd_keys(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"role", required_argument, NULL, 'r'}, {"tool-level", required_argument, NULL, 'l'}, {0}};
    const char *sub = argc > 1 ? argv[1] : "ls";
    if (argc > 1)
        argc--, argv++;
    const char *role = "member", *level = "sandbox";
    int o;
    while ((o = cli_getopt(cli, argc, argv, "r:l:", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        if (o == 'r')
            role = optarg;
        else
            level = optarg;
    }
    int n = argc - optind;
    if (!strcmp(sub, "ls") && n == 0)
        return keys_ls(cli);
    if (!strcmp(sub, "create") && n == 1) {
        json_t *body =
            json_pack("{s:s, s:s, s:s}", "user", argv[optind], "role", role, "tool_level", level);
        json_t *ans = NULL;
        int rc = cli_call(cli, "POST", "/v1/keys", body, &ans);
        if (rc == CLI_OK && !cli->json) {
            printf("%s\n", json_string_value(json_object_get(ans, "key")));
            fprintf(stderr, "sbx: key %s for %s; the key is shown only once\n",
                    json_string_value(json_object_get(ans, "id")), argv[optind]);
        }
        json_decref(ans);
        json_decref(body);
        return rc;
    }
    if (!strcmp(sub, "rm") && n == 1) {
        _cleanup_free_ char *e = sbx_escape(argv[optind]);
        _cleanup_free_ char *path = sbx_xasprintf("/v1/keys/%s", e);
        int rc = cli_call(cli, "DELETE", path, NULL, NULL);
        if (rc == CLI_OK && !cli->json)
            printf("%s\n", argv[optind]);
        return rc;
    }
    return cli_usage(cli, "expected `keys ls`, `keys create USER` or `keys rm ID`");
}

static int cmd_audit(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"verify", no_argument, NULL, 'v'},      {"sandbox", required_argument, NULL, 's'},
        {"user", required_argument, NULL, 'u'},  {"action", required_argument, NULL, 'a'},
        {"limit", required_argument, NULL, 'n'}, {0}};
    bool verify = false;
    json_t *q = json_object();
    int o, rc = CLI_OK;
    long long v;
    while (rc == CLI_OK && (o = cli_getopt(cli, argc, argv, "s:u:a:n:", longopts)) != -1) {
        if (o == '?')
            rc = CLI_USAGE;
        else if (o == 'v')
            verify = true;
        else if (o == 'n' && !parse_int(optarg, 1, 500, &v))
            rc = cli_usage(cli, "--limit: not a number in 1..500: %s", optarg);
        else
            json_object_set_new(q,
                                o == 's'   ? "sandbox_id"
                                : o == 'u' ? "user"
                                : o == 'a' ? "action"
                                           : "limit",
                                json_string(optarg));
    }
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 0, 0))
        rc = CLI_USAGE;
    if (rc != CLI_OK) {
        json_decref(q);
        return rc;
    }
    json_t *ans = NULL;
    if (verify) {
        json_decref(q);
        rc = cli_call(cli, "GET", "/v1/audit/verify", NULL, &ans);
        if (rc == CLI_OK && !json_is_true(json_object_get(ans, "ok"))) {
            if (!cli->json)
                fprintf(stderr, "sbx: the audit chain is broken at entry %lld: %s\n",
                        (long long)json_integer_value(json_object_get(ans, "first_bad_seq")),
                        json_string_value(json_object_get(ans, "reason")));
            rc = CLI_FAIL;
        } else if (rc == CLI_OK && !cli->json) {
            printf("ok: %lld entries checked\n",
                   (long long)json_integer_value(json_object_get(ans, "checked")));
        }
        json_decref(ans);
        return rc;
    }
    char path[2048] = "/v1/audit";
    size_t len = strlen(path);
    const char *k;
    json_t *val;
    json_object_foreach(q, k, val)
    {
        _cleanup_free_ char *e = sbx_escape(json_string_value(val));
        len +=
            (size_t)snprintf(path + len, sizeof(path) - len, "%c%s=%s", len == 9 ? '?' : '&', k, e);
        if (len >= sizeof(path)) {
            json_decref(q);
            return cli_usage(cli, "the filters are too long");
        }
    }
    json_decref(q);
    rc = cli_call(cli, "GET", path, NULL, &ans);
    if (rc == CLI_OK && !cli->json) {
        static const char *const head[] = {"SEQ",     "WHEN",    "USER",   "ACTION",
                                           "SANDBOX", "OUTCOME", "REQUEST"};
        struct fmt_table t;
        fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(ans, "data"), i, a)
        {
            char seq[32], when[32];
            fmt_reltime(time(NULL), json_integer_value(json_object_get(a, "ts_ms")) / 1000, when,
                        sizeof(when));
            const char *row[] = {cli_field(a, "seq", seq, sizeof(seq)),
                                 when,
                                 json_string_value(json_object_get(a, "user")),
                                 json_string_value(json_object_get(a, "action")),
                                 json_string_value(json_object_get(a, "sandbox_id")),
                                 json_string_value(json_object_get(a, "outcome")),
                                 json_string_value(json_object_get(a, "request_id"))};
            fmt_table_add(&t, row);
        }
        fmt_table_print(&t, stdout);
        fmt_table_release(&t);
        if (json_is_true(json_object_get(ans, "has_more")))
            fprintf(stderr, "sbx: more entries: raise --limit or use --json\n");
    }
    json_decref(ans);
    return rc;
}

static const struct cli_cmd cmds[] = {
    {"login", "[--url URL]", "check an API key and save it in ~/.config/sbx/config",
     "  -u, --url URL  the server (default: SBX_URL, the saved one, or " CLI_DEFAULT_URL ")\n"
     "The key is read from SBX_API_KEY, or from stdin (without echo on a terminal).\n"
     "The file is written with mode 0600.\n",
     cmd_login},
    {"keys", "[ls | create USER [--role R] [--tool-level L] | rm ID]", "manage API keys (admin)",
     "  -r, --role admin|member             (create; default member)\n"
     "  -l, --tool-level none|basic|sandbox (create; default sandbox)\n"
     "`keys create` prints the new key on stdout; it is shown only once.\n",
     cmd_keys},
    {"audit", "[--verify] [--sandbox ID] [--user U] [--action A] [--limit N]",
     "show the audit log, or verify its hash chain (admin)",
     "  -v, --verify       walk the hash chain; exit 1 when it is broken\n"
     "  -s, --sandbox ID   only this sandbox\n"
     "  -u, --user USER    only this user (admins)\n"
     "  -a, --action NAME  only this action (sandbox.create, exec, ...)\n"
     "  -n, --limit N      at most N entries (1-500, default 100)\n",
     cmd_audit},
};

const struct cli_group cli_admin_cmds = CLI_GROUP("Administration", cmds);
