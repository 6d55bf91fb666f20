/* The chat gateway's routes (docs/chat.md):
 *   POST /v1/chat/completions   OpenAI format, to SBX_LLM_URL
 *   POST /v1/messages           Anthropic format, to SBX_LLM_ANTHROPIC_URL
 * Any key may chat; the sandbox tool needs a member key with tool level "sandbox". */
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "chat.h"

static void chat(struct sbxd *d, struct http_req *req, const struct chat_format *f)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct chat_ask ask;
    if (!llm_has_api(d->llm, f->api)) {
        http_respond_errorf(req, "chat_unavailable", "the operator has not configured %s for sbxd",
                            f->api == LLM_API_OPENAI ? "SBX_LLM_URL" : "SBX_LLM_ANTHROPIC_URL");
        return;
    }
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (chat_ask_parse(body, f, &ask, &err) < 0) {
        chat_ask_clear(&ask);
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    if (!ask.sandbox) {
        chat_ask_clear(&ask);
        json_decref(body);
        chat_relay(d, req, f);
        return;
    }
    const struct auth_identity *who = http_req_identity(req);
    if (who->role < AUTH_ROLE_MEMBER || who->tool_level < AUTH_TOOL_SANDBOX) {
        chat_ask_clear(&ask);
        json_decref(body);
        http_respond_errorf(
            req, who->role < AUTH_ROLE_MEMBER ? "member_required" : "insufficient_tool_level",
            "the " CHAT_TOOL_TYPE " tool needs a member key with tool level "
            "\"sandbox\"");
        return;
    }
    chat_loop_start(d, req, f, body, &ask);
}

static void api_chat_completions(struct sbxd *d, struct http_req *req)
{
    chat(d, req, &chat_openai);
}

static void api_messages(struct sbxd *d, struct http_req *req)
{
    chat(d, req, &chat_anthropic);
}

static const struct route routes[] = {
    {"POST", "/v1/chat/completions", AUTH_KEY, api_chat_completions, 0},
    {"POST", "/v1/messages", AUTH_KEY, api_messages, 0},
};

const struct route_table chat_routes = ROUTE_TABLE(routes);
