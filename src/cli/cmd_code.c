#include "cli.h"
static const struct cli_cmd cmds[] = {{"code", "ID", "stub", "", NULL}};
const struct cli_group cli_code_cmds = CLI_GROUP("Code", cmds);
