/* The client's headers that go on to the model (chat_forward_headers, chat.h): shared by
 * the tool loop (loop.c) and the pass-through (relay.c), apart from the routes so that
 * neither calls back into chat_api.c. */
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "chat.h"

/* What of the client's headers the Anthropic endpoint needs; never its Authorization. */
static const char *const anthropic_headers[] = {"anthropic-version", "anthropic-beta"};
#define ANTHROPIC_VERSION_DEFAULT "2023-06-01"

void chat_forward_headers(struct http_req *req, const struct chat_format *f,
                          char *lines[CHAT_FORWARD_HEADERS_MAX + 1])
{
    size_t n = 0;
    if (f->api == LLM_API_ANTHROPIC) {
        for (size_t i = 0; i < SBX_ARRAY_SIZE(anthropic_headers); i++) {
            const char *v = req ? http_req_header(req, anthropic_headers[i]) : NULL;
            if (v && !strpbrk(v, "\r\n"))
                lines[n++] = sbx_xasprintf("%s: %s", anthropic_headers[i], v);
            else if (i == 0)
                lines[n++] = sbx_xstrdup("anthropic-version: " ANTHROPIC_VERSION_DEFAULT);
        }
    }
    lines[n] = NULL;
}

void chat_forward_headers_free(char *lines[CHAT_FORWARD_HEADERS_MAX + 1])
{
    for (size_t i = 0; lines[i]; i++)
        free(lines[i]);
}
