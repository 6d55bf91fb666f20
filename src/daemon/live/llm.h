/* llm_query's other end: chat completions against the operator's OpenAI-compatible endpoint
 * (SBX_LLM_URL, SBX_LLM_API_KEY, SBX_LLM_MODEL), performed by sbxd with libcurl's multi
 * interface inside our event loop, so the key never enters a sandbox and no call blocks. */
#ifndef SBX_LLM_H
#define SBX_LLM_H

#include <jansson.h>

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

int llm_new(struct loop *l, const char *base_url, const char *api_key, const char *model,
            struct llm **out, struct sbx_err *err);
void llm_free(struct llm *m);

/* req: {prompt, system?, model?, max_tokens?, temperature?}, checked here. */
int llm_query(struct llm *m, json_t *req, llm_done_fn cb, void *data, struct llm_call **out,
              struct sbx_err *err);
/* Stop a call; its callback never runs. */
void llm_cancel(struct llm_call *c);

#endif
