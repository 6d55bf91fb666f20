/* E2B's snapshots on sbx's workspace snapshots (e2b_snapshots.c, docs/e2b.md). */
#ifndef SBX_E2B_SNAPSHOTS_H
#define SBX_E2B_SNAPSHOTS_H

#include <stdbool.h>
#include <stddef.h>

struct sbxd;
struct http_req;

/* Does s have the form of a snapshot id? */
bool e2b_snapshot_id(const char *s);
/* Is name (an id or a name) one of user's snapshots? 1 with its sbx template in tmpl and
 * *from (malloc'd) the workspace a create's workspace_from takes; 0 when not. */
int e2b_snapshot_source(struct sbxd *d, const char *user, const char *name, char *tmpl,
                        size_t cap, char **from);
/* DELETE /e2b/api/templates/{id} (authenticated) when {id} is one of the caller's
 * snapshots or has a snapshot id's form: answered (204, or 404 snapshot_not_found), true;
 * false for other names, which are templates. */
bool e2b_snapshot_delete(struct sbxd *d, struct http_req *req);

#endif
