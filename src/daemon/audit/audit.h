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

/* What ran, in an entry's details: "command_sha256" (hex SHA-256 of all len bytes) and
 * "command", its first AUDIT_COMMAND_MAX bytes cut on a character (bytes that are not UTF-8,
 * NUL among them, dropped), with "command_truncated": true when cut. Every entry for something that runs
 * code or types into it (exec, run, processes, PTY sessions and their input, terminals,
 * E2B commands, tools) puts what ran through this one helper. details may be NULL (a new
 * object is made); it is returned. */
#define AUDIT_COMMAND_MAX 4096
json_t *audit_command_details(json_t *details, const char *command, size_t len);

#endif
