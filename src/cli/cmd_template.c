/* Templates: `sbx template export --docker NAME [--config ID]` (admin) imports a built
 * template into the daemon's Docker Engine, or a docker configuration's, as the image
 * sbx-NAME (docs/runtime.md "Docker"). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../common/util.h"
#include "cli.h"

static int tpl_export(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"docker", no_argument, NULL, 'd'},
                                             {"config", required_argument, NULL, 'c'},
                                             {0}};
    bool docker = false;
    const char *config = NULL;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        if (o == 'c')
            config = optarg;
        else
            docker = true;
    }
    if (!docker)
        return cli_usage(cli, "say where to: --docker (the daemon's Docker Engine)");
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    _cleanup_free_ char *e = sbx_escape(argv[optind]);
    _cleanup_free_ char *path = sbx_xasprintf("/v1/templates/%s/docker-image", e);
    if (!cli->json)
        fprintf(stderr, "importing template %s into the engine (a minute for base)...\n",
                argv[optind]);
    json_t *body = config ? json_pack("{s:s}", "config_id", config) : NULL;
    json_t *ans = NULL;
    int rc = cli_call(cli, "POST", path, body, &ans);
    if (rc == CLI_OK && !cli->json)
        printf("%s %s\n", json_string_value(json_object_get(ans, "image")),
               json_string_value(json_object_get(ans, "id")));
    json_decref(ans);
    json_decref(body);
    return rc;
}

static int cmd_template(struct cli *cli, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage(cli, "say export");
    if (!strcmp(argv[1], "export"))
        return tpl_export(cli, argc - 1, argv + 1);
    return cli_usage(cli, "unknown template command %s: export", argv[1]);
}

static const struct cli_cmd cmds[] = {
    {"template", "export --docker NAME [--config ID]",
     "templates as images for other runtimes (admin)",
     "  export --docker NAME  import the built template NAME into the daemon's Docker Engine\n"
     "                        as the image sbx-NAME:latest (what a docker configuration's\n"
     "                        sandboxes run unless it names another image); prints the image\n"
     "                        and its id\n"
     "      --config ID       into the engine docker configuration ID names instead (its\n"
     "                        host and TLS certificates: a remote engine too)\n",
     cmd_template},
};

const struct cli_group cli_template_cmds = CLI_GROUP("Templates", cmds);
