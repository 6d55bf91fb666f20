/* A sandbox configuration's document (docs/configs.md): checking what a client sends,
 * the stored form (every field present, secrets sealed), the masked form every answer
 * shows, and what a sandbox made from it gets. */
#ifndef SBX_CONFIGS_CONFIG_DOC_H
#define SBX_CONFIGS_CONFIG_DOC_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "secrets.h"

#define CONFIG_NAME_MAX 128
#define CONFIG_DESCRIPTION_MAX 1024
#define CONFIG_RULES_MAX 64
#define CONFIG_INJECT_MAX 8
#define CONFIG_HEADER_MAX 128
#define CONFIG_PATH_MAX 1024
#define CONFIG_TERMINAL_IDLE_DEFAULT 900
#define CONFIG_TERMINAL_IDLE_MIN 60
#define CONFIG_TERMINAL_IDLE_MAX 86400
/* The document's standard template, what a configuration names by default. */
#define CONFIG_STANDARD_TEMPLATE "base"
/* The template a configuration may name only with desktop_enabled (docs/templates.md). */
#define CONFIG_DESKTOP_TEMPLATE "desktop"

/* The daemon's ceilings a configuration's limits may not pass. */
struct config_ceilings {
    long long memory_mb, pids, cpu_millicores;
    long long command_timeout_sec; /* default_timeout_sec: a command's longest default */
};

/* Check the client's config object and build the stored document in *out: defaults
 * filled, secrets sealed (bound to config id), a masked placeholder replaced by the value
 * in stored (the document before this change, NULL for a new one), skill_image taken
 * from stored whatever the client sent. Errors: invalid_sandbox_config (400). */
int config_doc_build(const struct secrets *sec, const struct config_ceilings *ceil, const char *id,
                     json_t *in, const json_t *stored, json_t **out, struct sbx_err *err);
/* The stored document as answers show it: secrets masked, volume_mount marked
 * unsupported. */
json_t *config_doc_masked(const json_t *stored);
/* The configuration's env_vars in clear (a new object), for a sandbox made from it. */
/* config_docker.c: the docker object of a backend docker configuration, normalised into
 * *out (NULL for other backends); its limits go into limits. */
int config_doc_docker(json_t *in, const char *backend, const struct config_ceilings *ceil,
                      json_t *limits, json_t **out, struct sbx_err *err);
/* config_provider.c: the e2b or cube object of a sandbox_type e2b|cube configuration,
 * normalised into *out with its api_key sealed (NULL for other backends). */
int config_doc_provider(const struct secrets *sec, const char *id, json_t *in, const json_t *stored,
                        const char *backend, json_t **out, struct sbx_err *err);
/* The e2b/cube object's api_key masked, in place. */
void config_doc_provider_mask(json_t *doc);
/* The provider object with its api_key in clear and its "kind" (a new object), or NULL
 * when the configuration has none. */
int config_doc_provider_open(const struct secrets *sec, const char *id, const json_t *stored,
                             json_t **out, struct sbx_err *err);
char *config_doc_provider_context(const char *id);
/* value sealed under context, or the stored sealed value when value is the mask. */
int config_doc_seal_or_keep(const struct secrets *sec, const char *context, const char *what,
                            const char *value, const char *stored, char **out,
                            struct sbx_err *err);
int config_doc_env(const struct secrets *sec, const char *id, const json_t *stored, json_t **out,
                   struct sbx_err *err);
/* What a sandbox made from it gets for egress, without secrets: {policy: the network
 * object (deny_egress_by_default, allow_out, deny_out, rules) or null,
 * allow_private_endpoints}; NULL when the configuration has neither (the sandbox's own
 * egress policy alone decides). */
json_t *config_doc_network(const json_t *stored);
/* Whether the sandboxes of a stored document keep /workspace off this host (a provider's, a
 * remote docker engine's: rt_workspace_remote). */
bool config_doc_workspace_remote(const json_t *stored);
/* Its inject rules' headers in clear: {rule name: [{header, value (format applied)}]}. */
int config_doc_inject(const struct secrets *sec, const char *id, const json_t *stored, json_t **out,
                      struct sbx_err *err);
/* The context a configuration's env var is sealed under. */
char *config_doc_env_context(const char *id, const char *name);

#endif
