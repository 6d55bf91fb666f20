#include "audit.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/text.h"
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

json_t *audit_command_details(json_t *details, const char *command, size_t len)
{
    if (!details)
        details = json_object();
    if (!command)
        command = "", len = 0;
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_Digest(command, len, d, &dlen, EVP_sha256(), NULL) != 1)
        abort();
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    sbx_hex(d, dlen, hex);
    size_t keep = len > AUDIT_COMMAND_MAX ? AUDIT_COMMAND_MAX : len;
    _cleanup_free_ char *text = sbx_xmalloc(keep + 1);
    memcpy(text, command, keep);
    text[keep] = '\0';
    if (keep < len)
        keep = sbx_utf8_prefix(text, keep);
    keep = sbx_utf8_scrub(text, keep);
    text[keep] = '\0';
    json_object_set_new(details, "command_sha256", json_string(hex));
    json_object_set_new(details, "command", json_string(text));
    if (len > AUDIT_COMMAND_MAX)
        json_object_set_new(details, "command_truncated", json_true());
    return details;
}
