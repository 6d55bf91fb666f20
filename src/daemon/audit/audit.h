/* Writing the audit log: one entry per create, exec, run, file transfer, artifact,
 * snapshot, pause, resume, fork, destroy and key change. Like the manager, this is
 * daemon policy, not library code: a failed append is logged here and never fails the
 * user's request, whose action has already happened. */
#ifndef SBX_AUDIT_H
#define SBX_AUDIT_H

#include <jansson.h>

struct store;
struct auth_identity;

/* who NULL: the daemon itself (expiry, reconciliation), on behalf of user. details (may
 * be NULL) is taken over. */
void audit_record(struct store *st, const struct auth_identity *who, const char *user,
                  const char *request_id, const char *action, const char *sandbox_id,
                  const char *outcome, json_t *details);

#endif
