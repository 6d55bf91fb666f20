/* MCP sessions (Mcp-Session-Id): a random id minted at initialize, bound to the API key
 * that made it (another key gets 404, as an unknown id does), with the protocol version it
 * negotiated. Sessions are not authentication (the key is checked on every request) and
 * live in memory only: after a restart clients get 404 and initialize again. Idle ones
 * expire, since most clients never DELETE. */
#ifndef SBX_MCP_SESSION_H
#define SBX_MCP_SESSION_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"

#define MCP_SESSIONS_MAX 4096
#define MCP_SESSION_IDLE_MS (60LL * 60 * 1000)
#define MCP_SESSION_ID_LEN 32 /* hex of 16 random bytes */
#define MCP_VERSION_MAX 16

struct mcp_session {
    char id[MCP_SESSION_ID_LEN + 1];
    char key_id[AUTH_KEY_ID_LEN + 1];
    char version[MCP_VERSION_MAX];
    long long last_ms;
    struct mcp_session *next;
};

struct mcp_sessions {
    struct mcp_session *head;
    unsigned n;
};

/* A new session for key_id (expired ones are dropped first). too_many_sessions when full. */
int mcp_session_new(struct mcp_sessions *t, const char *key_id, const char *version,
                    long long now_ms, struct mcp_session **out, struct sbx_err *err);
/* The live session id of key_id (touched), or NULL. */
struct mcp_session *mcp_session_find(struct mcp_sessions *t, const char *id, const char *key_id,
                                     long long now_ms);
void mcp_session_remove(struct mcp_sessions *t, struct mcp_session *s);
void mcp_sessions_clear(struct mcp_sessions *t);

#endif
