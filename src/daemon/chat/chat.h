/* The chat gateway (docs/chat.md): POST /v1/chat/completions (OpenAI format) and
 * POST /v1/messages (Anthropic format) forwarded to the operator's model (live/llm.c). A
 * request whose tools list {"type": "sbx_sandbox"} (or whose container asks for document
 * skills) gets four sandbox tools that the gateway runs itself through the agent tools
 * (tools/tools.c) in one sandbox per x-sbx-session-id, a bounded number of rounds, and the
 * final message carries the sandbox's artifacts. Any other request passes through as is. */
#ifndef SBX_CHAT_H
#define SBX_CHAT_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../live/llm.h"
#include "../store/store.h"

#define CHAT_TOOL_TYPE "sbx_sandbox"
#define CHAT_SESSION_HEADER "x-sbx-session-id"
#define CHAT_SESSION_ID_MAX 128
/* Rounds of tool calls one request runs; past them the model is asked to answer without
 * tools, once. */
#define CHAT_ROUNDS_MAX 8
/* A conversation's sandbox lives this long after its last use. */
#define CHAT_SANDBOX_TTL 3600
/* What the model is shown of one tool's answer. */
#define CHAT_TOOL_RESULT_MAX (32u * 1024u)
#define CHAT_SKILLS_MAX 4
/* What an upstream_error quotes of the endpoint's answer. */
#define CHAT_UPSTREAM_SNIPPET 300
/* Where a document skill's files are copied in the sandbox (its SKILL.md's /skills/). */
#define CHAT_SKILLS_DIR ".skills"

struct sbxd;
struct http_req;

/* What the client asked of the gateway, read from its body. */
struct chat_ask {
    bool sandbox;   /* the sandbox tool is on */
    json_t *tool;   /* the {"type": "sbx_sandbox", ...} entry (owned), or NULL */
    json_t *skills; /* ["pdf", ...] (owned) */
    bool stream;
};

/* The two wire formats, each in its own file (openai.c, anthropic.c). */
struct chat_format {
    enum llm_api api;
    const char *name; /* "openai" / "anthropic", for audit */
    /* Make the client's body the upstream request: the sandbox tool replaced by the four
     * functions, container dropped, instructions added, stream off, a model when none. */
    void (*prepare)(json_t *body, const char *instructions, const char *default_model);
    /* The answer's tool calls: [{id, name, args} or {id, name, args_error}] (new), with
     * raw: the arguments as the model wrote them, when it wrote a string. */
    json_t *(*calls)(json_t *answer);
    /* The answer's text (malloc'd, "" when none). */
    char *(*text)(json_t *answer);
    /* Add the answer's turn and the results [{id, content, is_error}] to body. */
    void (*append)(json_t *body, json_t *answer, json_t *results);
    /* The next call may not use tools. */
    void (*tools_off)(json_t *body);
    /* Drop the answer's calls (nobody will run them) and call it a normal end. */
    void (*strip_calls)(json_t *answer);
    /* markdown after the answer's text, and sbx as its "sbx_sandbox". */
    void (*finish)(json_t *answer, const char *markdown, json_t *sbx);
    /* The answer's end reason: finish_reason / stop_reason. */
    const char *(*stop_reason)(json_t *answer);
};
extern const struct chat_format chat_openai;
extern const struct chat_format chat_anthropic;

/* request.c: read the sandbox tool, skills and container from body (invalid_request,
 * unsupported_skill, container_unsupported). */
int chat_ask_parse(json_t *body, const struct chat_format *f, struct chat_ask *out,
                   struct sbx_err *err);
void chat_ask_clear(struct chat_ask *a);
/* The fixed instructions: the sandbox's, then each skill's SKILL.md (malloc'd). */
struct skills;
char *chat_instructions(struct skills *k, json_t *skills);
/* Copy each skill's files to CHAT_SKILLS_DIR/<name>/ in the workspace. */
int chat_skills_install(struct skills *k, json_t *skills, const char *workspace,
                        struct sbx_err *err);

/* sbxtools.c: the four tools as the model sees them, and as the agent tools run them. */
json_t *chat_tools_openai(void);
json_t *chat_tools_anthropic(void);
bool chat_tool_known(const char *name);
/* After prepare: sandbox_bsl_check added to body's tools when skills has "bsl". */
void chat_tools_for_skills(json_t *body, json_t *skills, enum llm_api api);
/* body's tools without the sandbox tool, then ours (taken). */
void chat_tools_replace(json_t *body, json_t *ours);
/* The agent tool that runs name and its arguments (new), sandbox_id set. */
const char *chat_tool_impl(const char *name, json_t *args, const char *sandbox_id,
                           json_t **impl_args);
/* What the model is shown of a tool's answer (malloc'd, at most CHAT_TOOL_RESULT_MAX). */
char *chat_tool_result_text(const char *name, json_t *result);

/* loop.c: the tool loop for a request (body owned). */
void chat_loop_start(struct sbxd *d, struct http_req *req, const struct chat_format *f,
                     json_t *body, struct chat_ask *ask);
/* relay.c: the request as it came, the answer as it comes. */
void chat_relay(struct sbxd *d, struct http_req *req, const struct chat_format *f);
/* The extra upstream headers a client's request carries over (anthropic-version, -beta). */
#define CHAT_FORWARD_HEADERS_MAX 3
void chat_forward_headers(struct http_req *req, const struct chat_format *f,
                          char *lines[CHAT_FORWARD_HEADERS_MAX + 1]);
void chat_forward_headers_free(char *lines[CHAT_FORWARD_HEADERS_MAX + 1]);

#endif
