/* The chat gateway's conversations (docs/chat.md): which sandbox a caller's
 * x-sbx-session-id names, kept here so that a restart keeps the conversation's sandbox. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_chat_schema =
    "CREATE TABLE IF NOT EXISTS chat_sessions("
    "  user TEXT NOT NULL, session_id TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
    "  updated_at INTEGER NOT NULL, PRIMARY KEY(user, session_id));";

int store_chat_session_set(struct store *s, const char *user, const char *session_id,
                           const char *sandbox_id, long long now, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO chat_sessions(user,session_id,sandbox_id,updated_at) "
                          "VALUES(?,?,?,?) ON CONFLICT(user,session_id) DO UPDATE SET "
                          "sandbox_id=excluded.sandbox_id, updated_at=excluded.updated_at",
                          &st, err, "ttti", user, session_id, sandbox_id, now);
    if (r < 0)
        return r;
    return store_step_done(s, st, err, "set chat session");
}

int store_chat_session_get(struct store *s, const char *user, const char *session_id,
                           char out[STORE_ID_MAX + 1], struct sbx_err *err)
{
    sqlite3_stmt *st;
    out[0] = '\0';
    int r = store_prepare(s, "SELECT sandbox_id FROM chat_sessions WHERE user=? AND session_id=?",
                          &st, err, "tt", user, session_id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        store_col_text(st, 0, out, STORE_ID_MAX + 1);
    else if (rc == SQLITE_DONE)
        r = -ENOENT;
    else
        r = store_db_err(s, err, "get chat session");
    sqlite3_finalize(st);
    return r;
}
