/* The chat gateway's pure parts (src/daemon/chat/): what a request asks for, the two
 * formats' tool calls, results and final messages, the four tools' shapes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/chat/chat.h"
#include "check.h"

#define CHECK_EQ_STR(got, want, ...)                                                               \
    ({                                                                                             \
        const char *g_ = (got), *w_ = (want);                                                      \
        CHECK(g_ && !strcmp(g_, w_), __VA_ARGS__);                                                 \
    })

static json_t *J(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    if (!v)
        fprintf(stderr, "bad test JSON: %s\n", text);
    return v;
}

/* chat_ask_parse's error code for body ("" when it is accepted). */
static const char *ask_code(const char *body, bool *sandbox, size_t *skills)
{
    static char code[64];
    struct sbx_err err = {0};
    struct chat_ask a;
    json_t *b = J(body);
    int r = chat_ask_parse(b, &chat_openai, &a, &err);
    snprintf(code, sizeof(code), "%s", r < 0 ? err.code : "");
    if (sandbox)
        *sandbox = a.sandbox;
    if (skills)
        *skills = json_array_size(a.skills);
    chat_ask_clear(&a);
    json_decref(b);
    return code;
}

static void test_ask(void)
{
    bool on;
    size_t n;
    CHECK(!strcmp(ask_code("{\"messages\":[]}", &on, NULL), "") && !on, "no tool: pass-through");
    CHECK(
        !strcmp(ask_code("{\"tools\":[{\"type\":\"function\"}],\"messages\":[]}", &on, NULL), "") &&
            !on,
        "a client's function tool alone: pass-through");
    CHECK(!strcmp(ask_code("{\"tools\":[{\"type\":\"sbx_sandbox\",\"skills\":[\"pdf\",\"docx\","
                           "\"pdf\"]}],\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                           &on, &n),
                  "") &&
              on && n == 2,
          "skills are deduplicated");
    CHECK(!strcmp(ask_code("{\"container\":{\"skills\":[{\"type\":\"anthropic\",\"skill_id\":"
                           "\"xlsx\",\"version\":\"latest\"}]},\"messages\":[{\"role\":\"user\"}]}",
                           &on, &n),
                  "") &&
              on && n == 1,
          "container skills turn the tool on");
    static const struct {
        const char *body, *code;
    } bad[] = {
        {"{\"container\":{\"id\":\"c\"},\"messages\":[]}", "container_unsupported"},
        {"{\"container\":\"c\",\"messages\":[]}", "container_unsupported"},
        {"{\"container\":{\"skills\":[{\"type\":\"custom\",\"skill_id\":\"s\"}]}}",
         "unsupported_skill"},
        {"{\"container\":{\"skills\":[{\"type\":\"anthropic\",\"skill_id\":\"latex\"}]}}",
         "unsupported_skill"},
        {"{\"container\":{\"skills\":[{\"type\":\"anthropic\"}]}}", "invalid_request"},
        {"{\"container\":{\"skills\":{}}}", "invalid_request"},
        {"{\"container\":5}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\",\"skills\":[1]}]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\",\"template\":1}]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\",\"x\":1}]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\"},{\"type\":\"sbx_sandbox\"}]}", "invalid_request"},
        {"{\"tools\":{},\"messages\":[]}", "invalid_request"},
        {"{\"stream\":1,\"messages\":[]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\"}]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\"}],\"messages\":[]}", "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\"}],\"messages\":[{\"content\":\"x\"}]}",
         "invalid_request"},
        {"{\"tools\":[{\"type\":\"sbx_sandbox\",\"skills\":[\"docx\",\"xlsx\",\"pdf\",\"pptx\","
         "\"docx\"]}],\"container\":{\"skills\":[]},\"messages\":[{\"role\":\"user\"}]}",
         ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_EQ_STR(ask_code(bad[i].body, NULL, NULL), bad[i].code, "%s", bad[i].body);
}

static void test_tools(void)
{
    json_t *o = chat_tools_openai(), *a = chat_tools_anthropic();
    CHECK(json_array_size(o) == 4 && json_array_size(a) == 4, "four tools in each shape");
    static const char *const names[] = {"sandbox_bash", "sandbox_python", "sandbox_edit",
                                        "sandbox_files"};
    for (size_t i = 0; i < 4; i++) {
        json_t *fn = json_object_get(json_array_get(o, i), "function");
        json_t *params = json_object_get(fn, "parameters");
        CHECK_EQ_STR(json_string_value(json_object_get(fn, "name")), names[i], "openai %zu", i);
        CHECK(!json_object_get(json_object_get(params, "properties"), "sandbox_id"),
              "%s: no sandbox_id for the model", names[i]);
        json_t *req = json_object_get(params, "required");
        for (size_t j = 0; j < json_array_size(req); j++)
            CHECK(strcmp(json_string_value(json_array_get(req, j)), "sandbox_id"),
                  "%s: sandbox_id is not required", names[i]);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(a, i), "name")), names[i],
                     "anthropic %zu", i);
        CHECK(json_is_object(json_object_get(json_array_get(a, i), "input_schema")),
              "anthropic %zu has input_schema", i);
    }
    json_decref(o);
    json_decref(a);
    /* the bsl skill brings sandbox_bsl_check (docs/bsl.md), in both shapes */
    json_t *body = J("{\"tools\":[]}"), *skills = J("[\"pdf\",\"bsl\"]"), *none = J("[\"pdf\"]");
    chat_tools_for_skills(body, none, LLM_API_OPENAI);
    CHECK(json_array_size(json_object_get(body, "tools")) == 0, "no bsl skill, no bsl tool");
    chat_tools_for_skills(body, skills, LLM_API_OPENAI);
    json_t *fn = json_object_get(json_array_get(json_object_get(body, "tools"), 0), "function");
    CHECK_EQ_STR(json_string_value(json_object_get(fn, "name")), "sandbox_bsl_check",
                 "openai: sandbox_bsl_check with the bsl skill");
    CHECK(!json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"),
                           "sandbox_id"),
          "sandbox_bsl_check: no sandbox_id for the model");
    json_array_clear(json_object_get(body, "tools"));
    chat_tools_for_skills(body, skills, LLM_API_ANTHROPIC);
    CHECK_EQ_STR(json_string_value(
                     json_object_get(json_array_get(json_object_get(body, "tools"), 0), "name")),
                 "sandbox_bsl_check", "anthropic: sandbox_bsl_check with the bsl skill");
    json_t *impl_b, *bargs = J("{\"path\":\"m.bsl\"}");
    CHECK_EQ_STR(chat_tool_impl("sandbox_bsl_check", bargs, "sb_mine", &impl_b), "bsl_check",
                 "sandbox_bsl_check runs as bsl_check");
    json_decref(impl_b);
    json_decref(bargs);
    json_decref(body);
    json_decref(skills);
    json_decref(none);
    json_t *args = J("{\"code\":\"print(1)\",\"sandbox_id\":\"sb_other\",\"x\":1}"), *impl;
    CHECK_EQ_STR(chat_tool_impl("sandbox_python", args, "sb_mine", &impl), "sandbox_exec",
                 "sandbox_python runs as sandbox_exec");
    CHECK_EQ_STR(json_string_value(json_object_get(impl, "language")), "python", "in python");
    CHECK_EQ_STR(json_string_value(json_object_get(impl, "sandbox_id")), "sb_mine",
                 "on the conversation's sandbox, whatever the model says");
    CHECK(!json_object_get(impl, "x"), "only code and timeout_seconds go on");
    json_decref(impl);
    CHECK_EQ_STR(chat_tool_impl("sandbox_edit", args, "sb_mine", &impl), "edit_file",
                 "sandbox_edit runs as edit_file");
    CHECK_EQ_STR(json_string_value(json_object_get(impl, "sandbox_id")), "sb_mine",
                 "edit: the conversation's sandbox");
    json_decref(impl);
    json_decref(args);
    /* A tool answer over the limit is cut on a character boundary. */
    json_t *big = json_object();
    char *s = malloc(CHAT_TOOL_RESULT_MAX + 10);
    memset(s, 'a', CHAT_TOOL_RESULT_MAX + 8);
    s[CHAT_TOOL_RESULT_MAX + 8] = '\0';
    memcpy(s + CHAT_TOOL_RESULT_MAX - 12, "\xc8\x99\xc8\x99\xc8\x99", 6);
    json_object_set_new(big, "stdout", json_string(s));
    char *t = chat_tool_result_text("sandbox_bash", big);
    json_t *again = json_string(t);
    CHECK(again != NULL, "a cut answer is still UTF-8");
    CHECK(strstr(t, "[cut at") != NULL && strlen(t) < CHAT_TOOL_RESULT_MAX + 64, "and says so");
    json_decref(again);
    free(t);
    free(s);
    json_decref(big);
}

static void test_openai(void)
{
    json_t *body = J("{\"model\":\"m\",\"stream\":true,\"container\":{},\"tools\":[{\"type\":"
                     "\"function\",\"function\":{\"name\":\"mine\"}},{\"type\":\"sbx_sandbox\"}],"
                     "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    chat_openai.prepare(body, "INSTR", "dflt");
    json_t *tools = json_object_get(body, "tools");
    CHECK(json_array_size(tools) == 5, "the client's tool and our four");
    CHECK_EQ_STR(json_string_value(json_object_get(
                     json_object_get(json_array_get(tools, 0), "function"), "name")),
                 "mine", "the client's tool first");
    CHECK(!json_object_get(body, "stream") && !json_object_get(body, "container"),
          "stream and container dropped");
    json_t *m0 = json_array_get(json_object_get(body, "messages"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(m0, "content")), "INSTR", "instructions first");
    CHECK_EQ_STR(json_string_value(json_object_get(body, "model")), "m", "the client's model");
    json_t *answer = J("{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":null,"
                       "\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"sandbox_bash\","
                       "\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}},{\"id\":\"c2\","
                       "\"function\":{\"name\":\"sandbox_bash\",\"arguments\":\"{oops\"}},"
                       "{\"id\":\"c3\",\"function\":{\"name\":\"sandbox_files\",\"arguments\":"
                       "\"\"}}]},\"finish_reason\":\"tool_calls\"}]}");
    json_t *calls = chat_openai.calls(answer);
    CHECK(json_array_size(calls) == 3, "three calls");
    CHECK_EQ_STR(json_string_value(
                     json_object_get(json_object_get(json_array_get(calls, 0), "args"), "command")),
                 "ls", "arguments parsed");
    CHECK(json_object_get(json_array_get(calls, 1), "args_error") &&
              !json_object_get(json_array_get(calls, 1), "args"),
          "bad JSON is an args_error");
    CHECK(json_is_object(json_object_get(json_array_get(calls, 2), "args")),
          "empty arguments are {}");
    json_t *results = J("[{\"id\":\"c1\",\"content\":\"r1\",\"is_error\":false}]");
    chat_openai.append(body, answer, results);
    json_t *msgs = json_object_get(body, "messages");
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    CHECK_EQ_STR(json_string_value(json_object_get(last, "role")), "tool", "a tool message");
    CHECK_EQ_STR(json_string_value(json_object_get(last, "tool_call_id")), "c1", "its call");
    chat_openai.tools_off(body);
    CHECK_EQ_STR(json_string_value(json_object_get(body, "tool_choice")), "none", "tools off");
    chat_openai.strip_calls(answer);
    CHECK_EQ_STR(chat_openai.stop_reason(answer), "stop", "stripped: stop");
    json_t *sbx = json_object();
    chat_openai.finish(answer, "\n\nLIST", sbx);
    char *text = chat_openai.text(answer);
    CHECK_EQ_STR(text, "\n\nLIST", "markdown on a null content");
    CHECK(json_object_get(answer, "sbx_sandbox") == sbx, "sbx_sandbox set");
    free(text);
    json_decref(sbx);
    json_decref(results);
    json_decref(calls);
    json_decref(answer);
    json_decref(body);
}

static void test_anthropic(void)
{
    json_t *body = J("{\"system\":[{\"type\":\"text\",\"text\":\"theirs\"}],\"tools\":[{\"type\":"
                     "\"sbx_sandbox\"}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    chat_anthropic.prepare(body, "INSTR", "dflt");
    json_t *system = json_object_get(body, "system");
    CHECK(
        json_array_size(system) == 2 &&
            !strcmp(json_string_value(json_object_get(json_array_get(system, 0), "text")), "INSTR"),
        "instructions before the client's system blocks");
    CHECK(!json_object_get(body, "model"), "no model invented for Anthropic");
    json_t *s2 = J("{\"system\":\"theirs\",\"messages\":[]}");
    chat_anthropic.prepare(s2, "INSTR", NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(s2, "system")), "INSTR\n\ntheirs",
                 "a string system gets them in front");
    json_decref(s2);
    json_t *answer = J("{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"tool_use\","
                       "\"id\":\"t1\",\"name\":\"sandbox_bash\",\"input\":{\"command\":\"ls\"}},"
                       "{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"sandbox_bash\","
                       "\"input\":\"x\"},{\"type\":\"text\",\"text\":\"b\"}],"
                       "\"stop_reason\":\"tool_use\"}");
    json_t *calls = chat_anthropic.calls(answer);
    CHECK(json_array_size(calls) == 2, "two tool_use blocks");
    CHECK(json_object_get(json_array_get(calls, 1), "args_error") != NULL,
          "an input that is no object is an args_error");
    char *t = chat_anthropic.text(answer);
    CHECK_EQ_STR(t, "ab", "text blocks joined");
    free(t);
    json_t *results = J("[{\"id\":\"t1\",\"content\":\"r\",\"is_error\":true}]");
    chat_anthropic.append(body, answer, results);
    json_t *msgs = json_object_get(body, "messages");
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    json_t *blk = json_array_get(json_object_get(last, "content"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(blk, "type")), "tool_result", "tool_result");
    CHECK(json_is_true(json_object_get(blk, "is_error")), "is_error carried");
    chat_anthropic.strip_calls(answer);
    CHECK(json_array_size(json_object_get(answer, "content")) == 2 &&
              !strcmp(chat_anthropic.stop_reason(answer), "end_turn"),
          "tool_use blocks stripped");
    json_t *sbx = json_object();
    chat_anthropic.finish(answer, "\n\nLIST", sbx);
    CHECK_EQ_STR(json_string_value(json_object_get(
                     json_array_get(json_object_get(answer, "content"), 1), "text")),
                 "b\n\nLIST", "markdown on the last text block");
    json_decref(sbx);
    json_decref(results);
    json_decref(calls);
    json_decref(answer);
    json_decref(body);
}

static void test_instructions(void)
{
    json_t *skills = J("[\"pdf\"]");
    char *s = chat_instructions(NULL, skills);
    CHECK(strstr(s, "/workspace/out") && strstr(s, "Skill pdf") && strstr(s, "reportlab"),
          "without the catalog: the fallback line");
    free(s);
    json_decref(skills);
}

int main(void)
{
    test_ask();
    test_tools();
    test_openai();
    test_anthropic();
    test_instructions();
    return CHECK_DONE();
}
