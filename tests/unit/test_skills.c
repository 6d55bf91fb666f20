/* SKILL.md front matter (src/daemon/skills/frontmatter.c): what is taken, what is refused. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/skills/frontmatter.h"
#include "../../src/daemon/skills/install_agent.h"
#include "check.h"

static int parse(const char *text, struct skill_meta *m, struct sbx_err *err)
{
    memset(err, 0, sizeof(*err));
    return skill_meta_parse(text, strlen(text), m, err);
}

static void refused(const char *text, const char *why)
{
    struct skill_meta m;
    struct sbx_err err;
    int r = parse(text, &m, &err);
    CHECK(r < 0 && !strcmp(err.code, "invalid_skill"), "refused: %.60s (%.120s)", why, err.msg);
}

int main(void)
{
    struct skill_meta m;
    struct sbx_err err;
    int r = parse("---\nname: docx\ndescription: Word documents — ș ț\nversion: 2.0\n"
                  "envs:\n  - API_TOKEN\n  - name: REGION\n    description: where\n"
                  "    required: true\n---\n# docx\n",
                  &m, &err);
    CHECK(r == 0, "a full front matter parses (%.120s)", err.msg);
    if (r == 0) {
        CHECK(!strcmp(m.name, "docx") && !strcmp(m.version, "2.0"), "name and version");
        CHECK(!strcmp(m.description, "Word documents — ș ț"), "UTF-8 description kept");
        CHECK(json_array_size(m.envs) == 2, "two envs");
        json_t *e0 = json_array_get(m.envs, 0), *e1 = json_array_get(m.envs, 1);
        CHECK(!strcmp(json_string_value(json_object_get(e0, "name")), "API_TOKEN") &&
                  json_is_false(json_object_get(e0, "required")),
              "a bare name is an optional env");
        CHECK(json_is_true(json_object_get(e1, "required")) &&
                  !strcmp(json_string_value(json_object_get(e1, "description")), "where"),
              "a mapping env keeps description and required");
        skill_meta_clear(&m);
    }
    r = parse("---\nname: x\ndescription: y\n---", &m, &err);
    CHECK(r == 0 && !strcmp(m.version, "1.0.0"), "no body, default version");
    if (r == 0)
        skill_meta_clear(&m);
    r = parse("---\nname: x\ndescription: y\ninstall: scripts/install.sh\n---\n", &m, &err);
    CHECK(r == 0 && !strcmp(m.install, "scripts/install.sh"), "an install script is kept");
    if (r == 0)
        skill_meta_clear(&m);
    r = parse("---\nname: x\ndescription: y\n---\n", &m, &err);
    CHECK(r == 0 && m.install[0] == '\0', "no install script: empty");
    if (r == 0)
        skill_meta_clear(&m);
    refused("---\nname: x\ndescription: y\ninstall: /bin/evil\n---\n", "absolute install path");
    refused("---\nname: x\ndescription: y\ninstall: ../up.sh\n---\n", "install path with ..");
    refused("---\nname: x\ndescription: y\ninstall: \"\"\n---\n", "empty install path");
    r = parse("---\nname: x\ndescription: y\n---\r\nbody", &m, &err);
    CHECK(r == 0, "CRLF after the closing line");
    if (r == 0)
        skill_meta_clear(&m);
    refused("name: x\ndescription: y\n", "no opening ---");
    refused("---\nname: x\ndescription: y\n", "no closing ---");
    refused("---\ndescription: y\n---\n", "no name");
    refused("---\nname: Bad_Name\ndescription: y\n---\n", "upper case and underscore");
    refused("---\nname: -x\ndescription: y\n---\n", "leading dash");
    refused("---\nname: x\n---\n", "no description");
    refused("---\nname: x\ndescription: \"\"\n---\n", "empty description");
    refused("---\n- a\n- b\n---\n", "not a mapping");
    refused("---\nname: x\ndescription: [unclosed\n---\n", "bad YAML");
    refused("---\nname: x\ndescription: y\nenvs: PATH\n---\n", "envs not a list");
    refused("---\nname: x\ndescription: y\nenvs: [PATH]\n---\n", "PATH is reserved");
    refused("---\nname: x\ndescription: y\nenvs: [LD_PRELOAD]\n---\n", "LD_* is reserved");
    refused("---\nname: x\ndescription: y\nenvs: [SBX_KEY]\n---\n", "SBX_* is reserved");
    refused("---\nname: x\ndescription: y\nenvs: [\"1BAD\"]\n---\n", "a bad env name");
    refused("---\nname: x\ndescription: y\nenvs: [{name: A, required: maybe}]\n---\n",
            "required neither true nor false");
    refused("---\nname: x\ndescription: \xff\xfe\n---\n", "invalid UTF-8");
    /* The install agent's section of SKILL.md. */
    const char *md = "---\nname: x\n---\n# x\nintro\n## Installing it\nstep 1\n### detail\nd\n"
                     "## Use\nuse it\n";
    char *sec = install_agent_section(md, strlen(md));
    CHECK(sec && !strcmp(sec, "## Installing it\nstep 1\n### detail\nd\n"),
          "the install section runs to the next heading of its level (%s)", sec ? sec : "NULL");
    free(sec);
    md = "# Install\nall of it\n";
    sec = install_agent_section(md, strlen(md));
    CHECK(sec && !strcmp(sec, md), "a last section runs to the end");
    free(sec);
    md = "# x\n#install is not a heading\n## Use\n";
    sec = install_agent_section(md, strlen(md));
    CHECK(!sec, "no install heading: none");
    free(sec);
    return CHECK_DONE();
}
