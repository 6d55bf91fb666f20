#include "frontmatter.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <yaml.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/params.h"

static const char *scalar(yaml_document_t *doc, yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(doc, yaml_document_get_node(doc, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SKILL_NAME_MAX || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            return false;
    return true;
}

static int parse_envs(yaml_document_t *doc, yaml_node_t *list, json_t *out, struct sbx_err *err)
{
    if (list->type != YAML_SEQUENCE_NODE)
        return sbx_err_set(err, EINVAL, "invalid_skill", "envs must be a list");
    int n = 0;
    for (yaml_node_item_t *i = list->data.sequence.items.start; i < list->data.sequence.items.top;
         i++) {
        if (++n > SKILL_ENVS_MAX)
            return sbx_err_set(err, EINVAL, "invalid_skill", "at most %d envs", SKILL_ENVS_MAX);
        yaml_node_t *e = yaml_document_get_node(doc, *i);
        const char *name = e && e->type == YAML_SCALAR_NODE ? scalar(doc, e) : NULL;
        const char *desc = "", *req = NULL;
        if (e && e->type == YAML_MAPPING_NODE) {
            name = scalar(doc, map_get(doc, e, "name"));
            desc = scalar(doc, map_get(doc, e, "description"));
            req = scalar(doc, map_get(doc, e, "required"));
            desc = desc ? desc : "";
        }
        if (!name)
            return sbx_err_set(err, EINVAL, "invalid_skill",
                               "each env is a name or {name, description, required}");
        /* The same rules as a sandbox's env, reserved names included. */
        json_t *probe = json_pack("{s:s}", name, "");
        int r = sandbox_env_validate(probe, "envs", err);
        json_decref(probe);
        if (r < 0)
            return sbx_err_set(err, EINVAL, "invalid_skill", "%s", err->msg);
        /* What a skill's value could replace for every command of the sandbox. */
        if (!strcmp(name, "PATH") || !strcmp(name, "HOME") || !strncmp(name, "LD_", 3))
            return sbx_err_set(err, EINVAL, "invalid_skill",
                               "envs: %.64s is reserved (PATH, HOME, LD_*, SBX_*)", name);
        if (strlen(desc) > SKILL_ENV_DESCRIPTION_MAX)
            return sbx_err_set(err, EINVAL, "invalid_skill", "env %s: description too long", name);
        bool required = req && (!strcmp(req, "true") || !strcmp(req, "yes"));
        if (req && !required && strcmp(req, "false") && strcmp(req, "no"))
            return sbx_err_set(err, EINVAL, "invalid_skill", "env %s: required is true or false",
                               name);
        json_array_append_new(out, json_pack("{s:s,s:s,s:b}", "name", name, "description", desc,
                                             "required", required));
    }
    return 0;
}

static int from_doc(yaml_document_t *doc, struct skill_meta *m, struct sbx_err *err)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return sbx_err_set(err, EINVAL, "invalid_skill", "the front matter must be a mapping");
    const char *name = scalar(doc, map_get(doc, root, "name"));
    const char *desc = scalar(doc, map_get(doc, root, "description"));
    const char *ver = scalar(doc, map_get(doc, root, "version"));
    if (!name || !name_ok(name))
        return sbx_err_set(err, EINVAL, "invalid_skill",
                           "name must be 1 to %d of a-z 0-9 - (not starting or ending with -)",
                           SKILL_NAME_MAX);
    if (!desc || !*desc || strlen(desc) > SKILL_DESCRIPTION_MAX)
        return sbx_err_set(err, EINVAL, "invalid_skill",
                           "description must be a string of 1 to %d bytes", SKILL_DESCRIPTION_MAX);
    if (ver && (!*ver || strlen(ver) > SKILL_VERSION_MAX))
        return sbx_err_set(err, EINVAL, "invalid_skill", "version must be 1 to %d characters",
                           SKILL_VERSION_MAX);
    const char *install = scalar(doc, map_get(doc, root, "install"));
    if (install && (!*install || strlen(install) > SKILL_INSTALL_MAX || install[0] == '/' ||
                    strstr(install, "..") || !sbx_utf8_valid(install, strlen(install))))
        return sbx_err_set(err, EINVAL, "invalid_skill",
                           "install must be a path within the skill of 1 to %d bytes",
                           SKILL_INSTALL_MAX);
    if (install)
        snprintf(m->install, sizeof(m->install), "%s", install);
    m->envs = json_array();
    yaml_node_t *envs = map_get(doc, root, "envs");
    if (envs) {
        int r = parse_envs(doc, envs, m->envs, err);
        if (r < 0)
            return r;
    }
    snprintf(m->name, sizeof(m->name), "%s", name);
    snprintf(m->version, sizeof(m->version), "%s", ver ? ver : "1.0.0");
    m->description = sbx_xstrdup(desc);
    return 0;
}

int skill_meta_parse(const char *text, size_t len, struct skill_meta *out, struct sbx_err *err)
{
    if (len > SKILL_MD_MAX || !sbx_utf8_valid(text, len))
        return sbx_err_set(err, EINVAL, "invalid_skill",
                           "SKILL.md must be UTF-8 text of at most %u bytes", SKILL_MD_MAX);
    if (len < 4 || strncmp(text, "---\n", 4))
        return sbx_err_set(err, EINVAL, "invalid_skill",
                           "SKILL.md must start with YAML front matter between --- lines");
    const char *body = text + 4;
    const char *end = NULL, *stop = text + len;
    for (const char *p = body; p + 3 <= stop;) {
        if (!strncmp(p, "---", 3) && (p + 3 == stop || p[3] == '\n' || p[3] == '\r')) {
            end = p;
            break;
        }
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        if (!nl)
            break;
        p = nl + 1;
    }
    if (!end)
        return sbx_err_set(err, EINVAL, "invalid_skill", "the front matter has no closing ---");
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)body, (size_t)(end - body));
    int r;
    if (!yaml_parser_load(&parser, &doc)) {
        r = sbx_err_set(err, EINVAL, "invalid_skill", "front matter line %zu: %s",
                        parser.problem_mark.line + 2,
                        parser.problem ? parser.problem : "invalid YAML");
        yaml_parser_delete(&parser);
        return r;
    }
    struct skill_meta m = {0};
    r = from_doc(&doc, &m, err);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (r < 0) {
        skill_meta_clear(&m);
        return r;
    }
    *out = m;
    return 0;
}

void skill_meta_clear(struct skill_meta *m)
{
    free(m->description);
    json_decref(m->envs);
    memset(m, 0, sizeof(*m));
}
