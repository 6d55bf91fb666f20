#include "cli.h"
static const struct cli_cmd cmds[] = {{"terminal", "ID", "stub", "", NULL}};
const struct cli_group cli_terminal_cmds = CLI_GROUP("Terminal", cmds);
