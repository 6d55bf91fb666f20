/* The daemon's side of shell sessions (docs/sessions.md): the checks on what names a
 * session, shared by the session routes, exec and processes. The sessions
 * themselves live in the agent. */
#ifndef SBX_SESSION_H
#define SBX_SESSION_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define SESSION_ID_MAX 64
#define SESSION_DEFAULT_ID "default"
#define SESSION_TIMEOUT_MS_MAX 900000

struct sandbox;

/* [A-Za-z0-9_.-], 1 to SESSION_ID_MAX. */
bool session_id_valid(const char *id);
/* body's optional "session_id" (invalid_session_id); NULL in *out when absent. */
int session_id_parse(json_t *body, const char **out, struct sbx_err *err);
/* The session a command without session_id runs in: the default one, or none (NULL)
 * when the sandbox was created with enable_default_session: false. */
const char *session_for(const struct sandbox *sb, const char *requested);
/* The sandbox's env as the "K=V" list a new session starts from, plus extra (an
 * object of strings, may be NULL). */
json_t *session_env_list(const struct sandbox *sb, json_t *extra);

#endif
