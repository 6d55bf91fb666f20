#include "session.h"

#include <errno.h>
#include <string.h>

#include "../sandbox/manager.h"

bool session_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SESSION_ID_MAX)
        return false;
    for (const char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.'))
            return false;
    return true;
}

int session_id_parse(json_t *body, const char **out, struct sbx_err *err)
{
    json_t *v = json_object_get(body, "session_id");
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
        !session_id_valid(json_string_value(v)))
        return sbx_err_set(err, EINVAL, "invalid_session_id",
                           "session_id must be 1 to %d of A-Z a-z 0-9 _ . -", SESSION_ID_MAX);
    *out = json_string_value(v);
    return 0;
}

const char *session_for(const struct sandbox *sb, const char *requested)
{
    if (requested)
        return requested;
    return sb->rec.enable_default_session ? SESSION_DEFAULT_ID : NULL;
}

json_t *session_env_list(const struct sandbox *sb, json_t *extra)
{
    json_t *senv = sandbox_env_object(sb);
    json_t *list = sandbox_env_list(senv, extra);
    json_decref(senv);
    return list;
}
