/* What a chat request asks of the gateway: the sandbox tool, document skills (spec 000
 * "Skill-uri pentru documente"), and the fixed instructions those bring. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../files/workspace.h"
#include "../skills/catalog.h"
#include "chat.h"

/* The document skills shipped with sbx (skills/ of the checkout: skl_<name> in the
 * catalog), with what each uses, for when its SKILL.md cannot be read. */
static const struct {
    const char *name, *uses;
} doc_skills[] = {
    {"docx", "python-docx"},
    {"xlsx", "openpyxl"},
    {"pdf", "reportlab (with DejaVuSans for ș ț ă î â), weasyprint, pypdf"},
    {"pptx", "python-pptx style helpers (pptx_lib.py)"},
    /* 1C code checks: brings the sandbox_bsl_check tool (docs/bsl.md) */
    {"bsl", "the sandbox_bsl_check tool (sbx-bsl, bsl-language-server's diagnostics)"},
};

static const char *doc_skill_uses(const char *name)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(doc_skills); i++)
        if (!strcmp(doc_skills[i].name, name))
            return doc_skills[i].uses;
    return NULL;
}

static int add_skill(struct chat_ask *a, const char *name, struct sbx_err *err)
{
    if (!doc_skill_uses(name))
        return sbx_err_set(err, EINVAL, "unsupported_skill",
                           "skill %.64s is not one of the skills docx, xlsx, pdf, pptx, bsl", name);
    size_t i;
    json_t *v;
    json_array_foreach(a->skills, i, v)
    {
        if (!strcmp(json_string_value(v), name))
            return 0;
    }
    json_array_append_new(a->skills, json_string(name));
    return 0;
}

static int parse_tool(json_t *t, struct chat_ask *a, struct sbx_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(t, k, v)
    {
        if (strcmp(k, "type") && strcmp(k, "egress") && strcmp(k, "template") &&
            strcmp(k, "skills"))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "the " CHAT_TOOL_TYPE " tool takes type, egress, template and "
                               "skills, not %.64s",
                               k);
    }
    json_t *tpl = json_object_get(t, "template");
    if (tpl && !json_is_string(tpl))
        return sbx_err_set(err, EINVAL, "invalid_request", "template must be a string");
    json_t *skills = json_object_get(t, "skills");
    if (skills && !json_is_array(skills))
        return sbx_err_set(err, EINVAL, "invalid_request", "skills must be an array of names");
    size_t i;
    json_array_foreach(skills, i, v)
    {
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "skills must be an array of names");
        if (add_skill(a, json_string_value(v), err) < 0)
            return -EINVAL;
    }
    return 0;
}

/* {"container": {"skills": [{"type": "anthropic", "skill_id": "xlsx", "version"}]}}. */
static int parse_container(json_t *c, struct chat_ask *a, struct sbx_err *err)
{
    if (json_is_string(c) || json_object_get(c, "id"))
        return sbx_err_set(err, EINVAL, "container_unsupported",
                           "reusing a container (container.id) is not supported: send the "
                           "header " CHAT_SESSION_HEADER " to keep one sandbox per conversation");
    if (!json_is_object(c))
        return sbx_err_set(err, EINVAL, "invalid_request", "container must be an object");
    json_t *skills = json_object_get(c, "skills");
    if (skills && !json_is_array(skills))
        return sbx_err_set(err, EINVAL, "invalid_request", "container.skills must be an array");
    size_t i;
    json_t *s;
    json_array_foreach(skills, i, s)
    {
        const char *type = json_string_value(json_object_get(s, "type"));
        const char *id = json_string_value(json_object_get(s, "skill_id"));
        json_t *version = json_object_get(s, "version");
        if (!json_is_object(s) || !type || !id || (version && !json_is_string(version)))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "each container skill is {type, skill_id, version?}");
        if (strcmp(type, "anthropic"))
            return sbx_err_set(err, EINVAL, "unsupported_skill",
                               "%.32s skills are not supported: only the document skills (type "
                               "anthropic: docx, xlsx, pdf, pptx) run on the sandbox",
                               type);
        if (add_skill(a, id, err) < 0)
            return -EINVAL;
    }
    a->sandbox = true;
    return 0;
}

int chat_ask_parse(json_t *body, const struct chat_format *f, struct chat_ask *out,
                   struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    out->skills = json_array();
    json_t *stream = json_object_get(body, "stream");
    if (stream && !json_is_boolean(stream) && !json_is_null(stream))
        return sbx_err_set(err, EINVAL, "invalid_request", "stream must be true or false");
    out->stream = json_is_true(stream);
    json_t *tools = json_object_get(body, "tools");
    if (tools && !json_is_array(tools) && !json_is_null(tools))
        return sbx_err_set(err, EINVAL, "invalid_request", "tools must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, CHAT_TOOL_TYPE))
            continue;
        if (out->tool)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "tools lists " CHAT_TOOL_TYPE " more than once");
        out->tool = json_incref(t);
        out->sandbox = true;
        if (parse_tool(t, out, err) < 0)
            return -EINVAL;
    }
    json_t *container = json_object_get(body, "container");
    if (container && !json_is_null(container) && parse_container(container, out, err) < 0)
        return -EINVAL;
    if (json_array_size(out->skills) > CHAT_SKILLS_MAX)
        return sbx_err_set(err, EINVAL, "unsupported_skill", "at most %d skills", CHAT_SKILLS_MAX);
    if (!out->sandbox)
        return 0;
    json_t *messages = json_object_get(body, "messages");
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return sbx_err_set(err, EINVAL, "invalid_request", "messages must be a non-empty array");
    json_array_foreach(messages, i, t)
    {
        if (!json_is_object(t) || !json_is_string(json_object_get(t, "role")))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "each message must be an object with a role");
    }
    (void)f;
    return 0;
}

void chat_ask_clear(struct chat_ask *a)
{
    json_decref(a->skills);
    json_decref(a->tool);
    a->skills = NULL;
    a->tool = NULL;
}

/* ---- instructions ---- */

static const char sandbox_instructions[] =
    "You have a sandbox: a Linux machine with Python 3 and a persistent working directory "
    "/workspace, which you use through the tools sandbox_bash (a shell command), "
    "sandbox_python (a Python program), sandbox_edit (edit or create a text file) and "
    "sandbox_files (list, read or write files). Files you leave under /workspace/out/ are "
    "handed to the user as download links listed after your answer: write every file meant "
    "for the user there, and do not make up links yourself. When a tool answers an error, "
    "fix the call and try again.";

/* text with every "/skills/" made "/workspace/.skills/" (malloc'd). */
static char *relocate(const char *text)
{
    static const char from[] = "/skills/", to[] = "/workspace/" CHAT_SKILLS_DIR "/";
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, from)); p += sizeof(from) - 1)
        n++;
    char *out = sbx_xmalloc(strlen(text) + n * (sizeof(to) - sizeof(from)) + 1), *o = out;
    const char *p = text, *q;
    while ((q = strstr(p, from))) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, sizeof(to) - 1);
        o += sizeof(to) - 1;
        p = q + sizeof(from) - 1;
    }
    strcpy(o, p);
    return out;
}

/* SKILL.md without its front matter. */
static const char *skill_body(const char *md)
{
    if (strncmp(md, "---", 3))
        return md;
    const char *end = strstr(md + 3, "\n---");
    if (!end)
        return md;
    end += 4;
    while (*end == '\n' || *end == '\r')
        end++;
    return end;
}

char *chat_instructions(struct skills *k, json_t *skills)
{
    char *text = sbx_xstrdup(sandbox_instructions);
    size_t i;
    json_t *v;
    json_array_foreach(skills, i, v)
    {
        const char *name = json_string_value(v);
        _cleanup_free_ char *id = sbx_xasprintf("skl_%s", name);
        json_t *file = NULL;
        struct sbx_err err = {0};
        const char *md = NULL;
        if (k && skills_file_content(k, id, "SKILL.md", &file, &err) == 0 &&
            !strcmp(json_string_value(json_object_get(file, "encoding")) ?: "", "utf-8"))
            md = json_string_value(json_object_get(file, "content"));
        _cleanup_free_ char *body = md ? relocate(skill_body(md)) : NULL;
        char *next = body ? sbx_xasprintf("%s\n\nSkill %s (its files are in "
                                          "/workspace/" CHAT_SKILLS_DIR "/%s):\n%s",
                                          text, name, name, body)
                          : sbx_xasprintf("%s\n\nSkill %s: make real files in /workspace/out "
                                          "with %s.",
                                          text, name, doc_skill_uses(name));
        json_decref(file);
        free(text);
        text = next;
    }
    return text;
}

int chat_skills_install(struct skills *k, json_t *skills, const char *workspace,
                        struct sbx_err *err)
{
    _cleanup_close_ int root = -1;
    if (!k || json_array_size(skills) == 0)
        return 0;
    if (ws_open_root(workspace, &root, err) < 0)
        return sbx_err_ret(err);
    size_t i, j;
    json_t *v, *f;
    json_array_foreach(skills, i, v)
    {
        const char *name = json_string_value(v);
        _cleanup_free_ char *id = sbx_xasprintf("skl_%s", name);
        json_t *files = NULL;
        if (skills_files(k, id, &files, err) < 0)
            return sbx_err_ret(err);
        json_array_foreach(files, j, f)
        {
            const char *path = json_string_value(json_object_get(f, "path"));
            json_t *c = NULL;
            int r = skills_file_content(k, id, path, &c, err);
            const char *enc = json_string_value(json_object_get(c, "encoding"));
            json_t *content = json_object_get(c, "content");
            if (r == 0 && enc && !strcmp(enc, "utf-8")) {
                _cleanup_free_ char *dest = sbx_xasprintf(CHAT_SKILLS_DIR "/%s/%s", name, path);
                r = ws_write_file(root, dest, json_string_value(content),
                                  json_string_length(content), 0755, err);
            }
            json_decref(c);
            if (r < 0) {
                json_decref(files);
                return sbx_err_ret(err);
            }
        }
        json_decref(files);
    }
    return 0;
}
