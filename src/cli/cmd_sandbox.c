/* Sandbox life cycle: create, ls, get, rm, pause, resume, fork, snapshot, preview, egress. */
#include <getopt.h>
#include <string.h>
#include <time.h>

#include "../common/util.h"
#include "cli.h"
#include "fmt.h"
#include "sandbox_opts.h"

static int egress_opt(struct cli *cli, struct egress_opts *e, int o, const char *arg)
{
    if (o == 'a') {
        if (!e->domains)
            e->domains = json_array();
        json_array_append_new(e->domains, json_string(arg));
    } else if (o == 'P') {
        e->preset = arg;
    } else {
        e->none = true;
    }
    if ((e->domains != NULL) + (e->preset != NULL) + e->none > 1)
        return cli_usage(cli, "--allow, --preset and --no-egress exclude each other");
    return CLI_OK;
}

json_t *cli_egress_policy(struct egress_opts *e)
{
    if (e->domains)
        return json_pack("{s:s, s:O}", "mode", "allowlist", "domains", e->domains);
    if (e->preset)
        return json_pack("{s:s, s:s}", "mode", "preset", "preset", e->preset);
    if (e->none)
        return json_pack("{s:s}", "mode", "none");
    return NULL;
}

int cli_sandbox_opt(struct cli *cli, json_t *body, struct egress_opts *e, int o, const char *arg)
{
    long long v;
    switch (o) {
    case 't':
        json_object_set_new(body, "template", json_string(arg));
        return CLI_OK;
    case OPT_TTL:
        if (!parse_duration(arg, &v) || v < 1)
            return cli_usage(cli, "--ttl: not a duration: %s", arg);
        json_object_set_new(body, "ttl_seconds", json_integer(v));
        return CLI_OK;
    case 'e': {
        char *name;
        const char *value;
        if (!parse_env_pair(arg, &name, &value))
            return cli_usage(cli, "--env: expected NAME=VALUE, got %s", arg);
        json_t *env = json_object_get(body, "env");
        if (!env) {
            env = json_object();
            json_object_set_new(body, "env", env);
        }
        json_object_set_new(env, name, json_string(value));
        free(name);
        return CLI_OK;
    }
    case 'a':
    case 'P':
    case OPT_NO_EGRESS:
        return egress_opt(cli, e, o, arg);
    case OPT_BACKEND:
        json_object_set_new(body, "backend", json_string(arg));
        return CLI_OK;
    case OPT_SNAPSHOT:
        json_object_set_new(body, "snapshot_id", json_string(arg));
        return CLI_OK;
    case OPT_CONFIG:
        json_object_set_new(body, "config_id", json_string(arg));
        return CLI_OK;
    case OPT_VOLUME: {
        /* NAME:/PATH or NAME:/PATH:ro (docs/volumes.md); the server checks the rest. */
        const char *colon = strchr(arg, ':');
        if (!colon || colon == arg || colon[1] != '/')
            return cli_usage(cli, "--volume: expected VOLUME:/PATH[:ro], got %s", arg);
        size_t plen = strlen(colon + 1);
        bool ro = plen > 3 && !strcmp(colon + 1 + plen - 3, ":ro");
        json_t *vols = json_object_get(body, "volumes");
        if (!vols) {
            vols = json_array();
            json_object_set_new(body, "volumes", vols);
        }
        json_array_append_new(vols, json_pack("{s:s%,s:s%,s:b}", "volume", arg,
                                              (size_t)(colon - arg), "path", colon + 1,
                                              ro ? plen - 3 : plen, "read_only", ro));
        return CLI_OK;
    }
    }
    return CLI_USAGE;
}

static int cmd_create(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {SANDBOX_LONGOPTS, {0}};
    json_t *body = json_object();
    struct egress_opts e = {0};
    int o, rc = CLI_OK;
    while (rc == CLI_OK && (o = cli_getopt(cli, argc, argv, "t:e:a:P:", longopts)) != -1)
        rc = o == '?' ? CLI_USAGE : cli_sandbox_opt(cli, body, &e, o, optarg);
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 0, 0))
        rc = CLI_USAGE;
    json_t *pol = cli_egress_policy(&e);
    if (pol)
        json_object_set_new(body, "egress", pol);
    json_t *sb = NULL;
    if (rc == CLI_OK)
        rc = cli_call(cli, "POST", "/v1/sandboxes", body, &sb);
    if (rc == CLI_OK && !cli->json)
        printf("%s\n", json_string_value(json_object_get(sb, "id")));
    json_decref(sb);
    json_decref(body);
    json_decref(e.domains);
    return rc;
}

static int cmd_ls(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (!cli_nargs(cli, argc - optind, 0, 0))
        return CLI_USAGE;
    json_t *list = NULL;
    int rc = cli_call(cli, "GET", "/v1/sandboxes", NULL, &list);
    if (rc != CLI_OK || cli->json) {
        json_decref(list);
        return rc;
    }
    static const char *const head[] = {"ID", "STATUS", "TEMPLATE", "BACKEND", "CREATED", "EXPIRES"};
    struct fmt_table t;
    fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
    size_t i;
    json_t *sb;
    json_array_foreach(json_object_get(list, "data"), i, sb)
    {
        char b1[32], b2[32];
        const char *row[] = {
            json_string_value(json_object_get(sb, "id")),
            json_string_value(json_object_get(sb, "status")),
            json_string_value(json_object_get(sb, "template")),
            json_string_value(json_object_get(sb, "backend")),
            cli_when(sb, "created_at", b1, sizeof(b1)),
            cli_when(sb, "expires_at", b2, sizeof(b2)),
        };
        fmt_table_add(&t, row);
    }
    fmt_table_print(&t, stdout);
    fmt_table_release(&t);
    json_decref(list);
    return CLI_OK;
}

static void print_sandbox(json_t *sb)
{
    char buf[64];
    static const char *const plain[] = {"id",      "status",    "template",   "backend",
                                        "runtime", "parent_id", "ttl_seconds"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(plain); i++) {
        const char *v = cli_field(sb, plain[i], buf, sizeof(buf));
        if (v)
            printf("%-12s %s\n", plain[i], v);
    }
    static const char *const times[] = {"created_at", "expires_at", "paused_at"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(times); i++) {
        const char *v = cli_when(sb, times[i], buf, sizeof(buf));
        if (v)
            printf("%-12s %s\n", times[i], v);
    }
    json_t *eg = json_object_get(sb, "egress");
    if (eg) {
        printf("%-12s %s", "egress", json_string_value(json_object_get(eg, "mode")));
        const char *preset = json_string_value(json_object_get(eg, "preset"));
        if (preset)
            printf(" %s", preset);
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(eg, "domains"), i, d)
            printf("%s%s", i ? ", " : " ", json_string_value(d));
        putchar('\n');
    }
    json_t *env = json_object_get(sb, "env");
    if (json_object_size(env)) {
        printf("%-12s", "env");
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v) printf(" %s", k);
        putchar('\n');
    }
    json_t *lim = json_object_get(sb, "limits");
    if (lim)
        printf("%-12s memory %lld MB, pids %lld, cpu %lld millicores\n", "limits",
               (long long)json_integer_value(json_object_get(lim, "memory_mb")),
               (long long)json_integer_value(json_object_get(lim, "pids")),
               (long long)json_integer_value(json_object_get(lim, "cpu_millicores")));
}

/* The commands that take one ID and call one route on it. */
static int one_id(struct cli *cli, int argc, char **argv, const char *method, const char *suffix,
                  json_t **out)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    _cleanup_free_ char *path = cli_sb_path(argv[optind], suffix);
    return cli_call(cli, method, path, NULL, out);
}

static int cmd_get(struct cli *cli, int argc, char **argv)
{
    json_t *sb = NULL;
    int rc = one_id(cli, argc, argv, "GET", NULL, &sb);
    if (rc == CLI_OK && !cli->json)
        print_sandbox(sb);
    json_decref(sb);
    return rc;
}

static int cmd_rm(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (!cli_nargs(cli, argc - optind, 1, -1))
        return CLI_USAGE;
    int rc = CLI_OK;
    for (int i = optind; i < argc; i++) {
        _cleanup_free_ char *path = cli_sb_path(argv[i], NULL);
        int r = cli_call(cli, "DELETE", path, NULL, NULL);
        if (r == CLI_OK && !cli->json)
            printf("%s\n", argv[i]);
        if (r != CLI_OK)
            rc = r;
    }
    return rc;
}

static int cmd_pause(struct cli *cli, int argc, char **argv)
{
    json_t *sb = NULL;
    int rc = one_id(cli, argc, argv, "POST", "/pause", &sb);
    if (rc == CLI_OK && !cli->json) {
        char b[32];
        printf(
            "%s paused (%s snapshot, %lld ms)\n", json_string_value(json_object_get(sb, "id")),
            (fmt_bytes(json_integer_value(json_object_get(sb, "snapshot_bytes")), b, sizeof(b)), b),
            (long long)json_integer_value(json_object_get(sb, "pause_ms")));
    }
    json_decref(sb);
    return rc;
}

static int cmd_resume(struct cli *cli, int argc, char **argv)
{
    json_t *sb = NULL;
    int rc = one_id(cli, argc, argv, "POST", "/resume", &sb);
    if (rc == CLI_OK && !cli->json)
        printf("%s %s (%lld ms)\n", json_string_value(json_object_get(sb, "id")),
               json_string_value(json_object_get(sb, "status")),
               (long long)json_integer_value(json_object_get(sb, "ready_ms")));
    json_decref(sb);
    return rc;
}

static int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
    json_t *snap = NULL;
    int rc = one_id(cli, argc, argv, "POST", "/snapshot", &snap);
    if (rc == CLI_OK && !cli->json)
        printf("%s\n", json_string_value(json_object_get(snap, "id")));
    json_decref(snap);
    return rc;
}

static int cmd_fork(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'n'}, {"ttl", required_argument, NULL, OPT_TTL}, {0}};
    json_t *body = json_object();
    int o, rc = CLI_OK;
    long long v;
    while (rc == CLI_OK && (o = cli_getopt(cli, argc, argv, "n:", longopts)) != -1) {
        if (o == 'n' && parse_int(optarg, 1, 1000, &v))
            json_object_set_new(body, "count", json_integer(v));
        else if (o == OPT_TTL && parse_duration(optarg, &v))
            json_object_set_new(body, "ttl_seconds", json_integer(v));
        else
            rc = o == '?' ? CLI_USAGE : cli_usage(cli, "bad value: %s", optarg);
    }
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 1, 1))
        rc = CLI_USAGE;
    json_t *ans = NULL;
    if (rc == CLI_OK) {
        _cleanup_free_ char *path = cli_sb_path(argv[optind], "/fork");
        rc = cli_call(cli, "POST", path, body, &ans);
    }
    if (rc == CLI_OK && !cli->json) {
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(ans, "data"), i, f)
        {
            json_t *e = json_object_get(f, "error");
            if (e) {
                fprintf(stderr, "sbx: fork %zu failed: %s: %s\n", i,
                        json_string_value(json_object_get(e, "code")),
                        json_string_value(json_object_get(e, "message")));
                rc = CLI_API;
            } else {
                printf("%s\n", json_string_value(json_object_get(f, "id")));
            }
        }
    }
    json_decref(ans);
    json_decref(body);
    return rc;
}

static int cmd_preview(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"ttl", required_argument, NULL, OPT_TTL}, {0}};
    json_t *body = json_object();
    int o, rc = CLI_OK;
    long long v;
    while (rc == CLI_OK && (o = cli_getopt(cli, argc, argv, "", longopts)) != -1) {
        if (o == OPT_TTL && parse_duration(optarg, &v))
            json_object_set_new(body, "ttl_seconds", json_integer(v));
        else
            rc = o == '?' ? CLI_USAGE : cli_usage(cli, "--ttl: not a duration: %s", optarg);
    }
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 2, 2))
        rc = CLI_USAGE;
    if (rc == CLI_OK && !parse_int(argv[optind + 1], 1, 65535, &v))
        rc = cli_usage(cli, "not a port: %s", argv[optind + 1]);
    json_t *ans = NULL;
    if (rc == CLI_OK) {
        json_object_set_new(body, "port", json_integer(v));
        _cleanup_free_ char *path = cli_sb_path(argv[optind], "/preview");
        rc = cli_call(cli, "POST", path, body, &ans);
    }
    if (rc == CLI_OK && !cli->json)
        printf("%s\n", json_string_value(json_object_get(ans, "url")));
    json_decref(ans);
    json_decref(body);
    return rc;
}

static void print_egress(json_t *ans)
{
    json_t *pol = json_object_get(ans, "policy");
    if (!pol)
        pol = json_object_get(ans, "egress");
    printf("policy: %s", json_string_value(json_object_get(pol, "mode")));
    const char *preset = json_string_value(json_object_get(pol, "preset"));
    if (preset)
        printf(" %s", preset);
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(pol, "domains"), i, d)
        printf("%s%s", i ? ", " : " ", json_string_value(d));
    putchar('\n');
    json_t *data = json_object_get(ans, "data");
    if (!json_array_size(data))
        return;
    static const char *const head[] = {"WHEN", "VERDICT",  "HOST",  "PORT",
                                       "SENT", "RECEIVED", "REASON"};
    struct fmt_table t;
    fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
    json_t *c;
    json_array_foreach(data, i, c)
    {
        char when[32], port[16], sent[32], recv[32];
        fmt_reltime(time(NULL), json_integer_value(json_object_get(c, "started_at_ms")) / 1000,
                    when, sizeof(when));
        fmt_bytes(json_integer_value(json_object_get(c, "bytes_sent")), sent, sizeof(sent));
        fmt_bytes(json_integer_value(json_object_get(c, "bytes_received")), recv, sizeof(recv));
        const char *row[] = {when,
                             json_string_value(json_object_get(c, "verdict")),
                             json_string_value(json_object_get(c, "host")),
                             cli_field(c, "port", port, sizeof(port)),
                             sent,
                             recv,
                             json_string_value(json_object_get(c, "reason"))};
        fmt_table_add(&t, row);
    }
    putchar('\n');
    fmt_table_print(&t, stdout);
    fmt_table_release(&t);
}

static int cmd_egress(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"allow", required_argument, NULL, 'a'},
                                             {"preset", required_argument, NULL, 'P'},
                                             {"no-egress", no_argument, NULL, OPT_NO_EGRESS},
                                             {"none", no_argument, NULL, OPT_NO_EGRESS},
                                             {0}};
    struct egress_opts e = {0};
    int o, rc = CLI_OK;
    while (rc == CLI_OK && (o = cli_getopt(cli, argc, argv, "a:P:", longopts)) != -1)
        rc = o == '?' ? CLI_USAGE : egress_opt(cli, &e, o, optarg);
    if (rc == CLI_OK && !cli_nargs(cli, argc - optind, 1, 1))
        rc = CLI_USAGE;
    json_t *pol = cli_egress_policy(&e), *ans = NULL;
    if (rc == CLI_OK) {
        _cleanup_free_ char *path = cli_sb_path(argv[optind], "/egress");
        rc = cli_call(cli, pol ? "PUT" : "GET", path, pol, &ans);
    }
    if (rc == CLI_OK && !cli->json)
        print_egress(ans);
    json_decref(ans);
    json_decref(pol);
    json_decref(e.domains);
    return rc;
}

static const struct cli_cmd cmds[] = {
    {"create", "[OPTIONS]", "create a sandbox and print its id", SANDBOX_HELP, cmd_create},
    {"ls", "", "list your live sandboxes", "", cmd_ls},
    {"get", "ID", "show a sandbox", "", cmd_get},
    {"rm", "ID...", "destroy sandboxes", "", cmd_rm},
    {"pause", "ID", "pause a sandbox (checkpoint to disk, v2)", "", cmd_pause},
    {"resume", "ID", "resume a paused sandbox", "", cmd_resume},
    {"fork", "ID [-n N] [--ttl DURATION]", "copy a running sandbox N times (v2)",
     "  -n, --count N       how many copies (1-5, default 1)\n"
     "      --ttl DURATION  the copies' lifetime\n",
     cmd_fork},
    {"snapshot", "ID", "snapshot a v1 sandbox's workspace; prints the snapshot id", "",
     cmd_snapshot},
    {"preview", "ID PORT [--ttl DURATION]", "a URL for a server listening on PORT inside",
     "      --ttl DURATION  how long the link works (60s-1h, default 15m)\n", cmd_preview},
    {"egress", "ID [--allow DOMAIN... | --preset NAME | --no-egress]",
     "show the egress policy and connection log, or set the policy",
     "  -a, --allow DOMAIN  allow this host (repeatable): an allow-list policy\n"
     "  -P, --preset NAME   a preset policy: pypi, npm\n"
     "      --no-egress     no network at all\n",
     cmd_egress},
};

const struct cli_group cli_sandbox_cmds = CLI_GROUP("Sandboxes", cmds);
