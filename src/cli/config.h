/* Where sbx finds its server and key: SBX_URL and SBX_API_KEY, else the config file
 * ($XDG_CONFIG_HOME or ~/.config, then sbx/config: JSON {"url","api_key"}, mode 0600),
 * which `sbx login` writes. */
#ifndef SBX_CLI_CONFIG_H
#define SBX_CLI_CONFIG_H

#include "../common/err.h"

#define CLI_DEFAULT_URL "http://127.0.0.1:8787"
#define CLI_CONFIG_MAX (64 * 1024)

struct cli_config {
    char *url; /* never NULL after a successful load */
    char *key; /* NULL when there is none */
};

/* The config file's path (free it); NULL when neither XDG_CONFIG_HOME nor HOME is set. */
char *cli_config_path(void);
int cli_config_load(struct cli_config *cfg, struct sbx_err *err);
void cli_config_release(struct cli_config *cfg);
/* Write url and key to the config file (0600, its directory 0700), atomically. */
int cli_config_save(const char *url, const char *key, struct sbx_err *err);

#endif
