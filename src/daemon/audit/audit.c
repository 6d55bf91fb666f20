#include "audit.h"

#include <stdlib.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../auth/auth.h"
#include "../store/store.h"

void audit_record(struct store *st, const struct auth_identity *who, const char *user,
                  const char *request_id, const char *action, const char *sandbox_id,
                  const char *outcome, json_t *details)
{
    _cleanup_free_ char *dtext = details ? json_dumps(details, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(details);
    struct store_audit_entry e = {
        .ts_ms = sbx_wall_ms(),
        .user = who ? who->user : (user ? user : "system"),
        .key_id = who ? who->key_id : "system",
        .action = action,
        .sandbox_id = sandbox_id,
        .outcome = outcome,
        .request_id = request_id,
        .details = dtext,
    };
    struct sbx_err err = {0};
    if (store_audit_append(st, &e, &err) < 0)
        log_error("audit: could not record %s on %s: %s", action, sandbox_id ? sandbox_id : "-",
                  err.msg);
}
