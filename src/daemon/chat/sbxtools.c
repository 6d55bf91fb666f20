/* The four tools the gateway gives the model, each one of the agent tools (docs/tools.md)
 * on the conversation's sandbox: the model never names a sandbox, the gateway does; and a
 * fifth, sandbox_bsl_check, when the request asks for the bsl skill (docs/bsl.md). */
#include <string.h>

#include "../../common/util.h"
#include "../tools/catalog.h"
#include "chat.h"

static const char python_schema[] =
    "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\","
    "\"description\":\"A Python 3 program, run with /workspace as its directory.\"},"
    "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":900}},"
    "\"required\":[\"code\"]}";

static const struct {
    const char *name; /* the model's */
    const char *impl; /* the agent tool's */
    const char *description;
} defs[] = {
    {"sandbox_bash", "sandbox_bash", NULL},
    {"sandbox_python", "sandbox_exec",
     "Run a Python 3 program in the sandbox (in /workspace) and return its exit code, stdout, "
     "stderr and the files it wrote under /workspace/out."},
    {"sandbox_edit", "edit_file", NULL},
    {"sandbox_files", "sandbox_files", NULL},
    {"sandbox_bsl_check", "bsl_check", NULL}, /* with the bsl skill only (CHAT_BSL_TOOL) */
};

/* The first four are always given; the rest when a skill asks. */
#define CHAT_BASE_TOOLS 4

/* The tool's parameters without sandbox_id, which the gateway fills. */
static json_t *parameters(size_t i)
{
    const struct tool_def *t = tools_find(defs[i].impl);
    json_t *s = json_loads(i == 1 ? python_schema : t->input_schema, 0, NULL);
    if (!s)
        return json_object(); /* the catalogue's own text: its unit test parses each */
    json_object_del(json_object_get(s, "properties"), "sandbox_id");
    json_t *req = json_object_get(s, "required");
    for (size_t j = json_array_size(req); j-- > 0;)
        if (!strcmp(json_string_value(json_array_get(req, j)) ?: "", "sandbox_id"))
            json_array_remove(req, j);
    return s;
}

static const char *description(size_t i)
{
    return defs[i].description ? defs[i].description : tools_find(defs[i].impl)->description;
}

json_t *chat_tools_openai(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < CHAT_BASE_TOOLS; i++)
        json_array_append_new(a, json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function",
                                           "name", defs[i].name, "description", description(i),
                                           "parameters", parameters(i)));
    return a;
}

json_t *chat_tools_anthropic(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < CHAT_BASE_TOOLS; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:o}", "name", defs[i].name, "description",
                                           description(i), "input_schema", parameters(i)));
    return a;
}

void chat_tools_for_skills(json_t *body, json_t *skills, enum llm_api api)
{
    size_t i;
    json_t *v;
    json_array_foreach(skills, i, v)
    {
        if (strcmp(json_string_value(v) ?: "", "bsl"))
            continue;
        size_t k = CHAT_BASE_TOOLS; /* sandbox_bsl_check */
        json_t *tools = json_object_get(body, "tools");
        if (!json_is_array(tools))
            return;
        if (api == LLM_API_ANTHROPIC)
            json_array_append_new(tools,
                                  json_pack("{s:s,s:s,s:o}", "name", defs[k].name, "description",
                                            description(k), "input_schema", parameters(k)));
        else
            json_array_append_new(tools, json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function",
                                                   "function", "name", defs[k].name, "description",
                                                   description(k), "parameters", parameters(k)));
        return;
    }
}

void chat_tools_replace(json_t *body, json_t *ours)
{
    json_t *tools = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(body, "tools"), i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, CHAT_TOOL_TYPE))
            json_array_append(tools, t);
    }
    json_array_extend(tools, ours);
    json_decref(ours);
    json_object_set_new(body, "tools", tools);
}

static int find(const char *name)
{
    for (size_t i = 0; name && i < SBX_ARRAY_SIZE(defs); i++)
        if (!strcmp(defs[i].name, name))
            return (int)i;
    return -1;
}

bool chat_tool_known(const char *name)
{
    return find(name) >= 0;
}

const char *chat_tool_impl(const char *name, json_t *args, const char *sandbox_id,
                           json_t **impl_args)
{
    int i = find(name);
    json_t *a = json_is_object(args) ? json_deep_copy(args) : json_object();
    if (i == 1) { /* sandbox_python: a python program as a command */
        json_t *o = json_pack("{s:s}", "language", "python");
        json_t *code = json_object_get(a, "code"), *t = json_object_get(a, "timeout_seconds");
        json_object_set(o, "code", code ? code : json_null());
        if (t)
            json_object_set(o, "timeout_seconds", t);
        json_decref(a);
        a = o;
    }
    json_object_set_new(a, "sandbox_id", json_string(sandbox_id));
    *impl_args = a;
    return i < 0 ? name : defs[i].impl;
}

char *chat_tool_result_text(const char *name, json_t *result)
{
    json_t *shown = json_incref(result);
    if (find(name) == 1) { /* the exec record's essentials, not its receipt */
        json_decref(shown);
        shown = json_pack(
            "{s:O?,s:O?,s:O?,s:O?}", "exit_code", json_object_get(result, "exit_code"), "stdout",
            json_object_get(result, "stdout"), "stderr", json_object_get(result, "stderr"),
            "timed_out", json_object_get(result, "timed_out"));
        json_t *outputs = json_object_get(json_object_get(result, "receipt"), "outputs");
        if (outputs)
            json_object_set(shown, "files", outputs);
    }
    char *s = json_dumps(shown, JSON_COMPACT);
    json_decref(shown);
    if (!s)
        return sbx_xstrdup("{}");
    if (strlen(s) > CHAT_TOOL_RESULT_MAX) {
        size_t n = CHAT_TOOL_RESULT_MAX;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80) /* not inside a UTF-8 sequence */
            n--;
        char *cut = sbx_xasprintf("%.*s... [cut at %u bytes]", (int)n, s, CHAT_TOOL_RESULT_MAX);
        free(s);
        s = cut;
    }
    return s;
}
