/* The Anthropic messages format: tools as {name, description, input_schema}, the model's
 * calls as tool_use blocks of its content, the results as tool_result blocks of the next
 * user turn. */
#include <string.h>

#include "../../common/util.h"
#include "chat.h"

static void prepare(json_t *body, const char *instructions, const char *default_model)
{
    chat_tools_replace(body, chat_tools_anthropic());
    json_t *system = json_object_get(body, "system");
    if (json_is_string(system))
        json_object_set_new(body, "system",
                            json_sprintf("%s\n\n%s", instructions, json_string_value(system)));
    else if (json_is_array(system))
        json_array_insert_new(system, 0,
                              json_pack("{s:s,s:s}", "type", "text", "text", instructions));
    else
        json_object_set_new(body, "system", json_string(instructions));
    json_object_del(body, "container");
    json_object_del(body, "stream");
    (void)default_model; /* Anthropic's endpoint names its own models: the client's goes */
}

static json_t *calls(json_t *answer)
{
    json_t *out = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(answer, "content"), i, b)
    {
        if (strcmp(json_string_value(json_object_get(b, "type")) ?: "", "tool_use"))
            continue;
        const char *id = json_string_value(json_object_get(b, "id"));
        const char *name = json_string_value(json_object_get(b, "name"));
        json_t *input = json_object_get(b, "input");
        json_t *o = json_pack("{s:s,s:s}", "id", id ?: "", "name", name ?: "");
        if (json_is_object(input))
            json_object_set(o, "args", input);
        else
            json_object_set_new(o, "args_error", json_string("the input is not a JSON object"));
        json_array_append_new(out, o);
    }
    return out;
}

static char *text(json_t *answer)
{
    char *s = sbx_xstrdup("");
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(answer, "content"), i, b)
    {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (!t || strcmp(json_string_value(json_object_get(b, "type")) ?: "", "text"))
            continue;
        char *n = sbx_xasprintf("%s%s", s, t);
        free(s);
        s = n;
    }
    return s;
}

static void append(json_t *body, json_t *answer, json_t *results)
{
    json_t *messages = json_object_get(body, "messages");
    json_array_append_new(messages, json_pack("{s:s,s:O}", "role", "assistant", "content",
                                              json_object_get(answer, "content")));
    json_t *blocks = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(results, i, r)
    {
        json_array_append_new(blocks, json_pack("{s:s,s:O,s:O,s:O}", "type", "tool_result",
                                                "tool_use_id", json_object_get(r, "id"), "content",
                                                json_object_get(r, "content"), "is_error",
                                                json_object_get(r, "is_error")));
    }
    json_array_append_new(messages, json_pack("{s:s,s:o}", "role", "user", "content", blocks));
}

static void tools_off(json_t *body)
{
    json_object_set_new(body, "tool_choice", json_pack("{s:s}", "type", "none"));
}

static void strip_calls(json_t *answer)
{
    json_t *content = json_object_get(answer, "content");
    for (size_t i = json_array_size(content); i-- > 0;)
        if (!strcmp(json_string_value(json_object_get(json_array_get(content, i), "type")) ?: "",
                    "tool_use"))
            json_array_remove(content, i);
    json_object_set_new(answer, "stop_reason", json_string("end_turn"));
}

static void finish(json_t *answer, const char *markdown, json_t *sbx)
{
    json_t *content = json_object_get(answer, "content");
    if (!json_is_array(content)) {
        content = json_array();
        json_object_set_new(answer, "content", content);
    }
    if (markdown[0]) {
        json_t *last = NULL;
        for (size_t i = json_array_size(content); i-- > 0 && !last;)
            if (!strcmp(json_string_value(json_object_get(json_array_get(content, i), "type"))
                            ?: "",
                        "text"))
                last = json_array_get(content, i);
        if (last)
            json_object_set_new(last, "text",
                                json_sprintf("%s%s",
                                             json_string_value(json_object_get(last, "text")) ?: "",
                                             markdown));
        else
            json_array_append_new(content,
                                  json_pack("{s:s,s:s}", "type", "text", "text", markdown));
    }
    json_object_set(answer, "sbx_sandbox", sbx);
}

static const char *stop_reason(json_t *answer)
{
    return json_string_value(json_object_get(answer, "stop_reason")) ?: "end_turn";
}

const struct chat_format chat_anthropic = {
    .api = LLM_API_ANTHROPIC,
    .name = "anthropic",
    .prepare = prepare,
    .calls = calls,
    .text = text,
    .append = append,
    .tools_off = tools_off,
    .strip_calls = strip_calls,
    .finish = finish,
    .stop_reason = stop_reason,
};
