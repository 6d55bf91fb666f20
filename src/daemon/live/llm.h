/* llm_query's other end: chat completions against the operator's OpenAI-compatible endpoint
 * (SBX_LLM_URL, SBX_LLM_API_KEY, SBX_LLM_MODEL), performed by sbxd with libcurl's multi
 * interface inside our event loop, so the key never enters a sandbox and no call blocks. */
#ifndef SBX_LLM_H
#define SBX_LLM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"
#include "../../common/loop.h"

#define LLM_TIMEOUT_MS 120000
/* The endpoint's answer is read up to this size; a bigger one is an error. */
#define LLM_RESPONSE_MAX (4u * 1024u * 1024u)
#define LLM_PROMPT_MAX (1024u * 1024u)

struct llm;
struct llm_call;

/* Called once with the answer's text or an error (code "llm_error"). */
typedef void (*llm_done_fn)(const char *text, const struct sbx_err *err, void *data);

/* base_url NULL: no OpenAI-compatible endpoint (llm_query answers llm_error). */
int llm_new(struct loop *l, const char *base_url, const char *api_key, const char *model,
            struct llm **out, struct sbx_err *err);
void llm_free(struct llm *m);

/* req: {prompt, system?, model?, max_tokens?, temperature?}, checked here. */
int llm_query(struct llm *m, json_t *req, llm_done_fn cb, void *data, struct llm_call **out,
              struct sbx_err *err);
/* The chat gateway (docs/chat.md): a client's request body sent as is to one of the
 * operator's endpoints with the operator's key, the answer handed over as it comes. */
enum llm_api {
    LLM_API_OPENAI,    /* SBX_LLM_URL + /chat/completions, Authorization: Bearer */
    LLM_API_ANTHROPIC, /* SBX_LLM_ANTHROPIC_URL + /messages, x-api-key */
};
struct llm_raw_ops {
    /* The answer's bytes as they arrive, with its status and Content-Type; NULL: the answer
     * is buffered (at most LLM_RESPONSE_MAX) for on_done. <0 stops the transfer. */
    int (*on_data)(long status, const char *content_type, const char *buf, size_t len, void *data);
    /* Once, whatever the status; err (code upstream_error) when no full answer came. */
    void (*on_done)(long status, const char *content_type, const char *body, size_t len,
                    const struct sbx_err *err, void *data);
};
void llm_set_anthropic(struct llm *m, const char *base_url, const char *api_key);
bool llm_has_api(const struct llm *m, enum llm_api api);
const char *llm_default_model(const struct llm *m);
/* headers: extra "Name: value" lines, NULL-terminated (copied). chat_unavailable when that
 * endpoint is not configured. */
int llm_post(struct llm *m, enum llm_api api, const char *body, size_t len,
             const char *const *headers, const struct llm_raw_ops *ops, void *data,
             struct llm_call **out, struct sbx_err *err);
/* Stop a call; its callback never runs. */
void llm_cancel(struct llm_call *c);

#endif
