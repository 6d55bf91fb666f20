/* SKILL.md's YAML front matter (the Agent Skills format): the block between the first two
 * "---" lines, parsed with libyaml and checked at the boundary. */
#ifndef SBX_SKILLS_FRONTMATTER_H
#define SBX_SKILLS_FRONTMATTER_H

#include <jansson.h>
#include <stddef.h>

#include "../../common/err.h"

#define SKILL_MD_MAX (256u * 1024u)
#define SKILL_NAME_MAX 64
#define SKILL_DESCRIPTION_MAX 1024
#define SKILL_VERSION_MAX 32
#define SKILL_ENVS_MAX 32
#define SKILL_ENV_DESCRIPTION_MAX 512
#define SKILL_INSTALL_MAX 255

struct skill_meta {
    char name[SKILL_NAME_MAX + 1];
    char version[SKILL_VERSION_MAX + 1];
    /* The install script, relative to the skill ("" without one): run by every install
     * into a configuration (docs/skills.md). */
    char install[SKILL_INSTALL_MAX + 1];
    char *description;
    /* [{name, description, required}] for the variables the skill declares. */
    json_t *envs;
};

/* text: the whole SKILL.md. Errors: invalid_skill with what is wrong. */
int skill_meta_parse(const char *text, size_t len, struct skill_meta *out, struct sbx_err *err);
void skill_meta_clear(struct skill_meta *m);

#endif
