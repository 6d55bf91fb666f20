/* libFuzzer target for the chat gateway's reading of JSON it did not write
 * (src/daemon/chat/): a client's request body (chat_ask_parse, then prepare) and a model
 * endpoint's answer (calls, text, append, strip_calls, finish), in both formats. The
 * endpoint is the operator's, but what a model answers is not ours to trust.
 *
 * Input: one JSON document, used as both. Invariants: a refusal has a code and a
 * message; an accepted sandbox request has its sandbox tool replaced by exactly our four;
 * every call read from an answer is an object with string id and name and either object
 * args or an args_error string; a stripped answer has no calls left; nothing leaks.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/chat/chat.h"
#include "fuzz.h"

static void as_request(json_t *doc, const struct chat_format *f)
{
    struct sbx_err err = {0};
    struct chat_ask a;
    json_t *body = json_deep_copy(doc);
    if (chat_ask_parse(body, f, &a, &err) < 0) {
        REQUIRE(err.code[0] && err.msg[0]);
    } else if (a.sandbox) {
        f->prepare(body, "instructions", "model");
        size_t i, ours = 0;
        json_t *t;
        json_array_foreach(json_object_get(body, "tools"), i, t)
        {
            const char *type = json_string_value(json_object_get(t, "type"));
            REQUIRE(!type || strcmp(type, CHAT_TOOL_TYPE));
            json_t *fn = f->api == LLM_API_OPENAI ? json_object_get(t, "function") : t;
            ours += chat_tool_known(json_string_value(json_object_get(fn, "name")));
        }
        REQUIRE(ours >= 4);
        REQUIRE(!json_object_get(body, "container") && !json_object_get(body, "stream"));
    }
    chat_ask_clear(&a);
    json_decref(body);
}

static void as_answer(json_t *doc, const struct chat_format *f)
{
    json_t *answer = json_deep_copy(doc);
    json_t *calls = f->calls(answer);
    size_t i;
    json_t *c;
    REQUIRE(json_is_array(calls));
    json_t *results = json_array();
    json_array_foreach(calls, i, c)
    {
        REQUIRE(json_is_string(json_object_get(c, "id")));
        REQUIRE(json_is_string(json_object_get(c, "name")));
        REQUIRE(json_is_object(json_object_get(c, "args")) ^
                json_is_string(json_object_get(c, "args_error")));
        json_array_append_new(results, json_pack("{s:O,s:s,s:b}", "id", json_object_get(c, "id"),
                                                 "content", "r", "is_error", 0));
    }
    char *text = f->text(answer);
    REQUIRE(text);
    free(text);
    json_t *body = json_pack("{s:[]}", "messages");
    if (json_array_size(calls)) { /* the loop appends a turn only when it ran calls */
        f->append(body, answer, results);
        REQUIRE(json_array_size(json_object_get(body, "messages")) >= json_array_size(results) ||
                f->api == LLM_API_ANTHROPIC);
    }
    f->strip_calls(answer);
    json_t *left = f->calls(answer);
    REQUIRE(json_array_size(left) == 0);
    json_t *sbx = json_object();
    f->finish(answer, "\n\n**Files**\n- [a](b)", sbx);
    REQUIRE(f->stop_reason(answer));
    json_decref(sbx);
    json_decref(left);
    json_decref(body);
    json_decref(results);
    json_decref(calls);
    json_decref(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return 0;
    }
    as_request(doc, &chat_openai);
    as_request(doc, &chat_anthropic);
    as_answer(doc, &chat_openai);
    as_answer(doc, &chat_anthropic);
    json_decref(doc);
    return 0;
}
