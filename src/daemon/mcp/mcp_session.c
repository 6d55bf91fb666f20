#include "mcp_session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../../common/text.h"
#include "../../common/util.h"

static void expire(struct mcp_sessions *t, long long now_ms)
{
    for (struct mcp_session **p = &t->head; *p;) {
        struct mcp_session *s = *p;
        if (now_ms - s->last_ms > MCP_SESSION_IDLE_MS) {
            *p = s->next;
            free(s);
            t->n--;
        } else {
            p = &s->next;
        }
    }
}

int mcp_session_new(struct mcp_sessions *t, const char *key_id, const char *version,
                    long long now_ms, struct mcp_session **out, struct sbx_err *err)
{
    expire(t, now_ms);
    if (t->n >= MCP_SESSIONS_MAX)
        return sbx_err_set(err, EAGAIN, "too_many_sessions", "too many MCP sessions are open (%d)",
                           MCP_SESSIONS_MAX);
    unsigned char rnd[MCP_SESSION_ID_LEN / 2];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return sbx_err_sys(err, errno, "getrandom");
    struct mcp_session *s = sbx_xcalloc(1, sizeof(*s));
    sbx_hex(rnd, sizeof(rnd), s->id);
    snprintf(s->key_id, sizeof(s->key_id), "%s", key_id);
    snprintf(s->version, sizeof(s->version), "%s", version);
    s->last_ms = now_ms;
    s->next = t->head;
    t->head = s;
    t->n++;
    *out = s;
    return 0;
}

struct mcp_session *mcp_session_find(struct mcp_sessions *t, const char *id, const char *key_id,
                                     long long now_ms)
{
    expire(t, now_ms);
    for (struct mcp_session *s = t->head; id && s; s = s->next) {
        if (!strcmp(s->id, id) && !strcmp(s->key_id, key_id)) {
            s->last_ms = now_ms;
            return s;
        }
    }
    return NULL;
}

void mcp_session_remove(struct mcp_sessions *t, struct mcp_session *s)
{
    for (struct mcp_session **p = &t->head; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            free(s);
            t->n--;
            return;
        }
    }
}

void mcp_sessions_clear(struct mcp_sessions *t)
{
    while (t->head) {
        struct mcp_session *s = t->head;
        t->head = s->next;
        free(s);
    }
    t->n = 0;
}
