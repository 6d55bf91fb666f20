/* Personal environment variables (docs/configs.md): a user's own values for a
 * configuration's sandboxes and for the variables skills declare, sealed in the store,
 * never shown, and the order in which every source lands in a sandbox's env. */
#ifndef SBX_CONFIGS_ENVVARS_H
#define SBX_CONFIGS_ENVVARS_H

#include <jansson.h>

#include "../../common/err.h"
#include "configs.h"

#define ENVVARS_SKILL_ID_MAX 64
#define ENVVARS_DECL_FILE_MAX (1024 * 1024)

/* PATH, HOME, LD_*, SBX_* and what every sandbox env refuses: reserved_env_var (400). */
int envvars_check_name(const char *name, struct sbx_err *err);
/* The skills' declarations from a JSON file {"skill_id": [{name, description?,
 * required?}]} (SBX_SKILL_ENV), into the declaration table. */
int envvars_load_declarations(struct configs *c, const char *path, struct sbx_err *err);
/* scope "sandbox" (target a configuration id) or "skill" (target a skill id). */
int envvars_set(struct configs *c, const char *user, const char *scope, const char *target,
                const char *name, const char *value, struct sbx_err *err);
int envvars_delete(struct configs *c, const char *user, const char *scope, const char *target,
                   const char *name, struct sbx_err *err);
/* GET /v1/me/env-vars's data: per configuration, its variables and the skills', with
 * where each value comes from, never the value. */
json_t *envvars_describe(struct configs *c, const char *user, struct sbx_err *err);

#endif
