/* Session terminals over WebSocket (docs/terminals.md): single-use tickets bound to
 * the user, the key and the sandbox, and the bridge between one WebSocket and one
 * agent PTY (op pty_attach). Tickets live in memory only: they last two minutes, so a
 * restart of sbxd that voids them costs a client one more ticket. */
#ifndef SBX_TERMINAL_H
#define SBX_TERMINAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../auth/auth.h"
#include "../config.h"
#include "../store/store.h"

/* "tkt_" + 64 hex. */
#define TERMINAL_TICKET_LEN 68
/* Outstanding (unused, unexpired) tickets at once. */
#define TERMINAL_TICKETS_MAX 1024
/* Connected terminals in the whole daemon (the agent allows 5 per sandbox). */
#define TERMINAL_CONNS_MAX 1024
/* A control message from the client (resize) is small. */
#define TERMINAL_CONTROL_MAX 1024

struct terminals;
struct sandbox;
struct http_upgraded;

struct terminal_ticket {
    char user[AUTH_USER_MAX + 1];
    char key_id[AUTH_KEY_ID_LEN + 1];
    char sandbox_id[STORE_ID_MAX + 1];
};

int terminals_new(const struct sbxd_config *cfg, struct loop *l, struct terminals **out);
/* Close every terminal (their shells stay for their grace period). */
void terminals_free(struct terminals *t);

/* A fresh ticket for who on sandbox_id. err: too_many_tickets. */
int terminal_ticket_issue(struct terminals *t, const struct auth_identity *who,
                          const char *sandbox_id, char out[TERMINAL_TICKET_LEN + 1],
                          struct sbx_err *err);
/* Use up a ticket (whatever the outcome) and say whom it was for. err: invalid_ticket. */
int terminal_ticket_redeem(struct terminals *t, const char *ticket, struct terminal_ticket *out,
                           struct sbx_err *err);

/* Is this Origin header (NULL when absent) allowed? A page of sbxd's own origin (the
 * console, docs/console.md: Origin is http://<the request's Host>) always is. */
bool terminal_origin_allowed(const struct terminals *t, const char *origin, const char *host);

/* Bridge an upgraded WebSocket to PTY pty_id of sb (which answered pty_open or a
 * pty_resize just now). */
void terminal_bridge(struct terminals *t, struct sandbox *sb, const char *pty_id,
                     const char *key_id, struct http_upgraded *u, int fd, const char *extra,
                     size_t extra_len);
/* Answer an upgraded WebSocket with the error frame code, then close it (close_code): a
 * terminal the sandbox cannot open now (SANDBOX_PAUSED, SANDBOX_STOPPED,
 * TERMINAL_UNSUPPORTED), said after the upgrade as spec 002 has it. */
void terminal_refuse(struct terminals *t, const char *code, uint16_t close_code, const char *key_id,
                     struct http_upgraded *u, int fd, const char *extra, size_t extra_len);
/* Key key_id was deleted: its outstanding tickets go, and each terminal it opened gets an
 * error frame AUTH_REVOKED, then a close (1008); its shell ends. */
void terminals_revoke(struct terminals *t, const char *key_id);

#endif
