#include "params.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../runtime/rt.h"
#include "../volumes/volumes.h"
#include "template.h"

int sandbox_env_validate(json_t *env, const char *field, struct sbx_err *err)
{
    if (!env)
        return 0;
    if (!json_is_object(env))
        return sbx_err_set(err, EINVAL, "invalid_env", "%s must be an object of strings", field);
    if (json_object_size(env) > SANDBOX_ENV_MAX)
        return sbx_err_set(err, EINVAL, "invalid_env", "%s has more than %d variables", field,
                           SANDBOX_ENV_MAX);
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        bool ok = k[0] && !(k[0] >= '0' && k[0] <= '9') && strlen(k) <= 128;
        for (const char *c = k; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_';
        if (!ok)
            return sbx_err_set(err, EINVAL, "invalid_env", "%s: %.64s is not a valid variable name",
                               field, k);
        if (!strncmp(k, "SBX_", 4) || !strncmp(k, "GOOGLE_", 7))
            return sbx_err_set(err, EINVAL, "invalid_env",
                               "%s: variables named SBX_* or GOOGLE_* are reserved (%.64s)", field,
                               k);
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_env", "%s: %.64s must be a string", field, k);
        if (json_string_length(v) > SANDBOX_ENV_VALUE_MAX ||
            memchr(json_string_value(v), '\0', json_string_length(v)))
            return sbx_err_set(err, EINVAL, "invalid_env", "%s: %.64s is too long or contains NUL",
                               field, k);
    }
    return 0;
}

int sandbox_params_parse(json_t *body, struct sandbox_params *out, struct sbx_err *err)
{
    struct sandbox_params p = {.template_name = "base",
                               .ttl_seconds = SANDBOX_TTL_DEFAULT,
                               .enable_default_session = true};
    json_t *v;
    if ((v = json_object_get(body, "template")) && !json_is_null(v)) {
        if (!json_is_string(v) || !template_name_valid(json_string_value(v)))
            return sbx_err_set(err, EINVAL, "invalid_template",
                               "template must be the name of a built template");
        p.template_name = json_string_value(v);
        p.template_given = true;
    }
    if ((v = json_object_get(body, "ttl_seconds")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_TTL_MAX)
            return sbx_err_set(err, EINVAL, "invalid_ttl",
                               "ttl_seconds must be an integer from 1 to %d", SANDBOX_TTL_MAX);
        p.ttl_seconds = json_integer_value(v);
        p.ttl_given = true;
    }
    if ((v = json_object_get(body, "config_id")) && !json_is_null(v)) {
        if (!json_is_string(v) || !json_string_length(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "config_id must be a string");
        p.config_id = json_string_value(v);
    }
    if ((v = json_object_get(body, "limits")) && !json_is_null(v)) {
        static const char *const names[] = {"memory_mb", "pids", "cpu_millicores"};
        long long *dst[] = {&p.memory_mb, &p.pids, &p.cpu_millicores};
        if (!json_is_object(v))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "limits must be an object {memory_mb, pids, cpu_millicores}");
        for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++) {
            json_t *l = json_object_get(v, names[i]);
            if (l && (!json_is_integer(l) || json_integer_value(l) < 1))
                return sbx_err_set(err, EINVAL, "invalid_request",
                                   "limits.%s must be a positive integer", names[i]);
            *dst[i] = l ? json_integer_value(l) : 0;
        }
    }
    if ((v = json_object_get(body, "backend")) && !json_is_null(v)) {
        if (!json_is_string(v) ||
            (strcmp(json_string_value(v), "v1") && strcmp(json_string_value(v), "v2")))
            return sbx_err_set(err, EINVAL, "invalid_backend", "backend must be \"v1\" or \"v2\"");
        p.backend = json_string_value(v);
    }
    if ((v = json_object_get(body, "runtime")) && !json_is_null(v)) {
        if (!json_is_string(v) || !rt_backend_find(json_string_value(v)))
            return sbx_err_set(err, EINVAL, "invalid_runtime",
                               "runtime must be \"gvisor\", \"namespaces\" or \"local\"");
        p.runtime = json_string_value(v);
    }
    if ((v = json_object_get(body, "snapshot_id")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "snapshot_id must be a string");
        p.snapshot_id = json_string_value(v);
    }
    if ((v = json_object_get(body, "enable_default_session")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "enable_default_session must be true or false");
        p.enable_default_session = json_is_true(v);
    }
    if ((v = json_object_get(body, "volumes")) && !json_is_null(v)) {
        int r = volumes_mounts_check(v, err);
        if (r < 0)
            return r;
        p.volumes = json_array_size(v) ? v : NULL;
    }
    int er = egress_policy_parse(json_object_get(body, "egress"), &p.egress, err);
    if (er < 0)
        return er;
    v = json_object_get(body, "env");
    if (v && !json_is_null(v)) {
        int r = sandbox_env_validate(v, "env", err);
        if (r < 0)
            return r;
        p.env = v;
    }
    *out = p;
    return 0;
}

json_t *sandbox_env_list(json_t *sandbox_env, json_t *extra)
{
    json_t *list = json_array();
    json_t *merged = json_object();
    if (sandbox_env)
        json_object_update(merged, sandbox_env);
    if (extra)
        json_object_update(merged, extra);
    const char *k;
    json_t *v;
    json_object_foreach(merged, k, v)
    {
        char *kv = sbx_xasprintf("%s=%s", k, json_string_value(v));
        json_array_append_new(list, json_string(kv));
        free(kv);
    }
    json_decref(merged);
    return list;
}
