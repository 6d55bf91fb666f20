/* The chat gateway's conversations (docs/chat.md): which sandbox a caller's
 * x-sbx-session-id names, kept here so that a restart keeps the conversation's sandbox. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

int store_chat_session_set(struct store *s, const char *user, const char *session_id,
                           const char *sandbox_id, long long now, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO chat_sessions(\"user\",session_id,sandbox_id,updated_at) "
                     "VALUES(?,?,?,?) ON CONFLICT(\"user\",session_id) DO UPDATE SET "
                     "sandbox_id=excluded.sandbox_id, updated_at=excluded.updated_at",
                     "ttti", user, session_id, sandbox_id, now);
    return r < 0 ? r : db_run(st, err);
}

int store_chat_session_get(struct store *s, const char *user, const char *session_id,
                           char out[STORE_ID_MAX + 1], struct sbx_err *err)
{
    struct db_stmt *st;
    out[0] = '\0';
    int r = db_query(s->conn, &st, err,
                     "SELECT sandbox_id FROM chat_sessions WHERE \"user\"=? AND session_id=?", "tt",
                     user, session_id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        db_col_copy(st, 0, out, STORE_ID_MAX + 1);
    db_finalize(st);
    return r == DB_DONE ? -ENOENT : r < 0 ? r : 0;
}
