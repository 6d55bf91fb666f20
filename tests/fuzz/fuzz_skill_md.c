/* libFuzzer target for SKILL.md front matter (src/daemon/skills/frontmatter.c), read from
 * uploaded skill bundles. Input: any bytes as SKILL.md. Whatever parses must satisfy what
 * the catalog relies on: a valid name, a non-empty description within its bound, envs a
 * list of objects with a string name.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "../../src/daemon/skills/frontmatter.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct skill_meta m;
    struct sbx_err err = {0};
    if (skill_meta_parse((const char *)data, size, &m, &err) < 0) {
        REQUIRE(!strcmp(err.code, "invalid_skill"));
        return 0;
    }
    REQUIRE(m.name[0] && strlen(m.name) <= SKILL_NAME_MAX);
    REQUIRE(m.description && m.description[0] && strlen(m.description) <= SKILL_DESCRIPTION_MAX);
    REQUIRE(json_is_array(m.envs) && json_array_size(m.envs) <= SKILL_ENVS_MAX);
    for (size_t i = 0; i < json_array_size(m.envs); i++)
        REQUIRE(json_is_string(json_object_get(json_array_get(m.envs, i), "name")));
    skill_meta_clear(&m);
    return 0;
}
