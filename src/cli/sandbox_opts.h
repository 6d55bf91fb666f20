/* The sandbox options that `create` and `run` share (template, ttl, env, egress,
 * backend, snapshot, configuration); parsed in cmd_sandbox.c. */
#ifndef SBX_CLI_SANDBOX_OPTS_H
#define SBX_CLI_SANDBOX_OPTS_H

#include <getopt.h>
#include <jansson.h>

#include "cli.h"

struct egress_opts {
    json_t *domains; /* --allow, in order */
    const char *preset;
    bool none;
};

enum { OPT_BACKEND = 1000, OPT_SNAPSHOT, OPT_NO_EGRESS, OPT_TTL, OPT_VOLUME, OPT_CONFIG, OPT_CMD_BASE = 1100 };
#define SANDBOX_SHORTOPTS "t:e:a:P:"
#define SANDBOX_LONGOPTS                                                                           \
    {"template", required_argument, NULL, 't'}, {"ttl", required_argument, NULL, OPT_TTL},         \
        {"env", required_argument, NULL, 'e'}, {"allow", required_argument, NULL, 'a'},            \
        {"preset", required_argument, NULL, 'P'}, {"no-egress", no_argument, NULL, OPT_NO_EGRESS}, \
        {"backend", required_argument, NULL, OPT_BACKEND},                                         \
        {"volume", required_argument, NULL, OPT_VOLUME},                                           \
        {"config", required_argument, NULL, OPT_CONFIG},                                           \
    {                                                                                              \
        "snapshot", required_argument, NULL, OPT_SNAPSHOT                                          \
    }
#define SANDBOX_HELP                                                                               \
    "  -t, --template NAME   template (default base)\n"                                            \
    "      --ttl DURATION    lifetime: 600, 90s, 15m, 2h, 1d (default 1h)\n"                       \
    "  -e, --env NAME=VALUE  environment variable (repeatable)\n"                                  \
    "  -a, --allow DOMAIN    egress allow-list entry (repeatable)\n"                               \
    "  -P, --preset NAME     egress preset: pypi, npm\n"                                           \
    "      --no-egress       no network (the default)\n"                                           \
    "      --backend v1|v2   runtime backend\n"                                                    \
    "      --snapshot ID     start from a v1 snapshot\n"                                         \
    "      --volume V:PATH[:ro]  mount volume V (id or name) at PATH (repeatable)\n"             \
    "      --config ID       from the sandbox configuration ID (its backend, image, limits)\n"

/* Apply one of SANDBOX_LONGOPTS to body (or to e for egress); returns an exit code. */
int cli_sandbox_opt(struct cli *cli, json_t *body, struct egress_opts *e, int o, const char *arg);
/* The policy the options asked for, or NULL when none was given. */
json_t *cli_egress_policy(struct egress_opts *e);

#endif
