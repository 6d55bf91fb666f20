/* sbx: the command-line client. `sbx help` lists the commands; each group of commands
 * lives in its cmd_*.c and is listed in groups[] below. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct cli_group *const groups[] = {
    &cli_sandbox_cmds, &cli_exec_cmds,     &cli_files_cmds,
    &cli_code_cmds,    &cli_terminal_cmds, &cli_admin_cmds,
    &cli_volume_cmds,  &cli_template_cmds,
};

static const struct cli_cmd *find(const char *name)
{
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        for (size_t i = 0; i < groups[g]->n; i++)
            if (!strcmp(groups[g]->cmds[i].name, name))
                return &groups[g]->cmds[i];
    return NULL;
}

static void help_all(FILE *f)
{
    fputs("usage: sbx [--json] COMMAND [ARGS...]\n\n"
          "The sbx sandbox service from the command line. The server and key come from\n"
          "SBX_URL and SBX_API_KEY, or from ~/.config/sbx/config (written by `sbx login`).\n",
          f);
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        fprintf(f, "\n%s:\n", groups[g]->title);
        for (size_t i = 0; i < groups[g]->n; i++)
            fprintf(f, "  %-10s %s\n", groups[g]->cmds[i].name, groups[g]->cmds[i].summary);
    }
    fputs("\n  --json on every command prints the API's JSON for scripts.\n"
          "Exit codes: 0 ok; exec and run: the command's own code; 1 local failure;\n"
          "2 usage error; 3 API error; 4 the server could not be reached.\n"
          "`sbx help COMMAND` shows a command's options.\n",
          f);
}

static int help(struct cli *cli, int argc, char **argv)
{
    if (argc < 2) {
        help_all(stdout);
        return CLI_OK;
    }
    const struct cli_cmd *cmd = find(argv[1]);
    if (!cmd) {
        fprintf(stderr, "sbx: unknown command: %s\n", argv[1]);
        help_all(stderr);
        return CLI_USAGE;
    }
    cli_help_cmd(cmd, stdout);
    return CLI_OK;
}

int main(int argc, char **argv)
{
    struct cli cli = {0};
    /* --json is global: take it out wherever it is, up to a `--` (after which the words
     * belong to a command run in the sandbox). */
    int n = 0;
    bool rest = false;
    for (int i = 0; i < argc; i++) {
        if (!rest && !strcmp(argv[i], "--"))
            rest = true;
        if (!rest && i > 0 && !strcmp(argv[i], "--json")) {
            cli.json = true;
            continue;
        }
        argv[n++] = argv[i];
    }
    argv[n] = NULL;
    argc = n;
    if (argc < 2) {
        help_all(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        return help(&cli, argc - 1, argv + 1);
    const struct cli_cmd *cmd = find(name);
    if (!cmd) {
        fprintf(stderr, "sbx: unknown command: %s (see `sbx help`)\n", name);
        return CLI_USAGE;
    }
    cli.cmd = cmd;
    if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
        cli_help_cmd(cmd, stdout);
        return CLI_OK;
    }
    int rc = cmd->run(&cli, argc - 1, argv + 1);
    sbx_client_free(cli.api);
    return rc;
}
