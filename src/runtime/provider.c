/* provider.json and provider_error.json (provider.h, docs/providers.md). */
#include "provider.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "docker_api.h"
#include "provider_api.h"

#define PROVIDER_FILE_MAX (256u * 1024u)

bool rt_is_provider(const char *backend)
{
    return backend && (!strcmp(backend, "e2b") || !strcmp(backend, "cube"));
}

bool rt_workspace_remote(const char *backend, const struct rt_docker *docker)
{
    return rt_is_provider(backend) || (backend && !strcmp(backend, "docker") && docker &&
                                       docker_host_remote(docker->host));
}

int rt_provider_write(const struct rt_config *cfg, const struct rt_spec *spec,
                      const char *backend, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider.json", spec->state_dir);
    const struct rt_provider *p = spec->provider;
    if (!p && access(path, F_OK) == 0)
        return 0; /* a restart keeps what its first start was given */
    if (!p)
        p = !strcmp(backend, "cube") ? cfg->cube : cfg->e2b;
    if (!p || !p->api_url || !p->template_id)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "the %s backend has no connection (api_url and template_id)", backend);
    json_t *network = p->network ? json_loads(p->network, 0, NULL) : NULL;
    json_t *conn = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:I}", "kind", backend, "api_url",
                             p->api_url, "api_key", p->api_key && *p->api_key ? p->api_key : NULL,
                             "sandbox_url", p->sandbox_url && *p->sandbox_url ? p->sandbox_url : NULL,
                             "domain", p->domain && *p->domain ? p->domain : NULL,
                             "http_timeout_ms", (json_int_t)p->http_timeout_ms);
    json_t *doc = json_pack("{s:o,s:s,s:I,s:{},s:{s:s},s:o?,s:s}", "conn", conn, "template_id",
                            p->template_id, "timeout_s",
                            (json_int_t)(p->ttl_s > 0 ? p->ttl_s : RT_PROVIDER_TTL_DEFAULT_S),
                            "env", "metadata", PROVIDER_META_ID, spec->id, "network", network,
                            "agent_path", cfg->agent_path);
    if (p->config_id && *p->config_id)
        json_object_set_new(json_object_get(doc, "metadata"), PROVIDER_META_CONFIG,
                            json_string(p->config_id));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text)
        return sbx_err_set(err, ENOMEM, "internal", "provider.json");
    /* Holds the provider's key: 0600 in the state dir, which only sbxd and its shim read. */
    int r = sbx_write_file_replace(path, text, strlen(text), 0600);
    free(text);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    _cleanup_free_ char *failed = sbx_xasprintf("%s/provider_error.json", spec->state_dir);
    (void)unlink(failed);
    return 0;
}

int rt_provider_failure(const char *state_dir, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_error.json", state_dir);
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(path, PROVIDER_FILE_MAX, &text, NULL) < 0)
        return 0;
    json_t *j = json_loads(text, 0, NULL);
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    int e = !code                                    ? EIO
            : !strcmp(code, "provider_timeout")      ? ETIMEDOUT
            : !strcmp(code, "provider_unreachable")  ? ECONNREFUSED
            : !strcmp(code, "provider_auth_failed")  ? EACCES
            : !strcmp(code, "provider_rate_limited") ? EAGAIN
                                                     : EIO;
    int r = sbx_err_set(err, e, code && !strncmp(code, "provider_", 9) ? code : "provider_error",
                        "%s", msg ? msg : "the provider relay failed");
    json_decref(j);
    return r;
}
