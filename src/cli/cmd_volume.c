/* Volumes (docs/volumes.md): `sbx volume create|ls|rm|cp`. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"
#include "fmt.h"

static int vol_create(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"size", required_argument, NULL, 's'}, {0}};
    long long size = 0;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "s:", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        char *end;
        size = strtoll(optarg, &end, 10);
        if (*end || size < 1)
            return cli_usage(cli, "--size is a number of MB");
    }
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    json_t *body = json_pack("{s:s}", "name", argv[optind]);
    if (size)
        json_object_set_new(body, "size_mb", json_integer(size));
    json_t *ans = NULL;
    int rc = cli_call(cli, "POST", "/v1/volumes", body, &ans);
    json_decref(body);
    if (rc == CLI_OK && !cli->json)
        printf("%s\n", json_string_value(json_object_get(ans, "id")));
    json_decref(ans);
    return rc;
}

static int vol_ls(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (!cli_nargs(cli, argc - optind, 0, 0))
        return CLI_USAGE;
    json_t *list = NULL;
    int rc = cli_call(cli, "GET", "/v1/volumes", NULL, &list);
    if (rc != CLI_OK || cli->json) {
        json_decref(list);
        return rc;
    }
    static const char *const head[] = {"ID", "NAME", "SIZE_MB", "USED_BYTES", "MOUNTED", "CREATED"};
    struct fmt_table t;
    fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(list, "data"), i, v)
    {
        char b1[32], b2[32], b3[32], b4[32];
        snprintf(b3, sizeof(b3), "%zu", json_array_size(json_object_get(v, "mounted_in")));
        const char *row[] = {
            json_string_value(json_object_get(v, "id")),
            json_string_value(json_object_get(v, "name")),
            cli_field(v, "size_mb", b1, sizeof(b1)),
            cli_field(v, "used_bytes", b2, sizeof(b2)),
            b3,
            cli_when(v, "created_at", b4, sizeof(b4)),
        };
        fmt_table_add(&t, row);
    }
    fmt_table_print(&t, stdout);
    fmt_table_release(&t);
    json_decref(list);
    return CLI_OK;
}

static int vol_rm(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (argc - optind < 1)
        return cli_usage(cli, "name at least one volume");
    for (int i = optind; i < argc; i++) {
        _cleanup_free_ char *e = sbx_escape(argv[i]);
        _cleanup_free_ char *path = sbx_xasprintf("/v1/volumes/%s", e);
        int rc = cli_call(cli, "DELETE", path, NULL, NULL);
        if (rc != CLI_OK)
            return rc;
        if (!cli->json)
            printf("%s deleted\n", argv[i]);
    }
    return CLI_OK;
}

static int vol_cp(struct cli *cli, int argc, char **argv)
{
    return cli_copy(cli, argc, argv, "volumes");
}

static int cmd_volume(struct cli *cli, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(struct cli *, int, char **);
    } subs[] = {{"create", vol_create}, {"ls", vol_ls}, {"rm", vol_rm}, {"cp", vol_cp}};
    if (argc < 2)
        return cli_usage(cli, "say create, ls, rm or cp");
    for (size_t i = 0; i < SBX_ARRAY_SIZE(subs); i++)
        if (!strcmp(argv[1], subs[i].name))
            return subs[i].run(cli, argc - 1, argv + 1);
    return cli_usage(cli, "unknown volume command %s: create, ls, rm or cp", argv[1]);
}

static const struct cli_cmd cmds[] = {
    {"volume", "create NAME [--size MB] | ls | rm ID... | cp SRC DST",
     "named storage that outlives sandboxes",
     "  create NAME [-s, --size MB]  a new volume (the operator's default size without --size)\n"
     "  ls                           your volumes, their use and how many sandboxes mount them\n"
     "  rm ID...                     delete (refused while a sandbox mounts it)\n"
     "  cp SRC DST                   copy files, as `sbx cp`, with VOLUME:PATH on one side\n"
     "Mount one at create: `sbx create --volume NAME:/data[:ro]`.\n",
     cmd_volume},
};

const struct cli_group cli_volume_cmds = CLI_GROUP("Volumes", cmds);
