/* The OpenAI chat-completions format: tools as {type: function, function}, the model's
 * calls in choices[0].message.tool_calls (arguments as a JSON string), the results as
 * role "tool" messages. */
#include <string.h>

#include "../../common/util.h"
#include "chat.h"

static void prepare(json_t *body, const char *instructions, const char *default_model)
{
    chat_tools_replace(body, chat_tools_openai());
    json_array_insert_new(json_object_get(body, "messages"), 0,
                          json_pack("{s:s,s:s}", "role", "system", "content", instructions));
    json_object_del(body, "container");
    json_object_del(body, "stream");
    json_object_del(body, "stream_options");
    if (!json_is_string(json_object_get(body, "model")) && default_model)
        json_object_set_new(body, "model", json_string(default_model));
}

static json_t *message(json_t *answer)
{
    return json_object_get(json_array_get(json_object_get(answer, "choices"), 0), "message");
}

static json_t *calls(json_t *answer)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(message(answer), "tool_calls"), i, c)
    {
        json_t *fn = json_object_get(c, "function");
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        json_t *raw = json_object_get(fn, "arguments");
        json_t *o = json_pack("{s:s,s:s}", "id", id ?: "", "name", name ?: "");
        if (json_is_string(raw))
            json_object_set(o, "raw", raw);
        json_error_t je;
        json_t *args = NULL;
        if (json_is_object(raw))
            args = json_incref(raw);
        else if (json_is_string(raw) && json_string_length(raw) == 0)
            args = json_object();
        else if (json_is_string(raw))
            args = json_loadb(json_string_value(raw), json_string_length(raw), 0, &je);
        if (json_is_object(args))
            json_object_set_new(o, "args", args);
        else {
            json_decref(args);
            json_object_set_new(o, "args_error",
                                json_sprintf("the arguments are not a JSON object%s%s",
                                             json_is_string(raw) ? ": " : "",
                                             json_is_string(raw) ? je.text : ""));
        }
        json_array_append_new(out, o);
    }
    return out;
}

static char *text(json_t *answer)
{
    return sbx_xstrdup(json_string_value(json_object_get(message(answer), "content")) ?: "");
}

static void append(json_t *body, json_t *answer, json_t *results)
{
    json_t *messages = json_object_get(body, "messages");
    json_t *m = json_deep_copy(message(answer));
    json_object_set_new(m, "role", json_string("assistant"));
    json_array_append_new(messages, m);
    size_t i;
    json_t *r;
    json_array_foreach(results, i, r)
    {
        json_array_append_new(messages, json_pack("{s:s,s:O,s:O}", "role", "tool", "tool_call_id",
                                                  json_object_get(r, "id"), "content",
                                                  json_object_get(r, "content")));
    }
}

static void tools_off(json_t *body)
{
    json_object_set_new(body, "tool_choice", json_string("none"));
}

static void strip_calls(json_t *answer)
{
    json_object_del(message(answer), "tool_calls");
    json_object_set_new(json_array_get(json_object_get(answer, "choices"), 0), "finish_reason",
                        json_string("stop"));
}

static void finish(json_t *answer, const char *markdown, json_t *sbx)
{
    json_t *m = message(answer);
    if (m && markdown[0]) {
        _cleanup_free_ char *t = text(answer);
        json_object_set_new(m, "content", json_sprintf("%s%s", t, markdown));
    }
    json_object_set(answer, "sbx_sandbox", sbx);
}

static const char *stop_reason(json_t *answer)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(answer, "choices"), 0),
                                             "finish_reason"))
               ?: "stop";
}

const struct chat_format chat_openai = {
    .api = LLM_API_OPENAI,
    .name = "openai",
    .prepare = prepare,
    .calls = calls,
    .text = text,
    .append = append,
    .tools_off = tools_off,
    .strip_calls = strip_calls,
    .finish = finish,
    .stop_reason = stop_reason,
};
