/* provider.json and provider_error.json (provider.h, docs/providers.md). */
#include "provider.h"

#include <errno.h>
#include <fcntl.h>
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

/* {api_key?, network?} of p, or NULL when it has neither. */
static char *secret_of(const struct rt_provider *p)
{
    json_t *network = p->network ? json_loads(p->network, 0, NULL) : NULL;
    json_t *j = json_pack("{s:s?,s:o?}", "api_key", p->api_key && *p->api_key ? p->api_key : NULL,
                          "network", network);
    char *text = j && json_object_size(j) ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

/* provider.json's conn.key_from: "platform" when the connection is cfg's. */
static bool platform_conn(const char *path)
{
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(path, PROVIDER_FILE_MAX, &text, NULL) < 0)
        return false;
    json_t *j = json_loads(text, 0, NULL);
    const char *from = json_string_value(json_object_get(json_object_get(j, "conn"), "key_from"));
    bool r = from && !strcmp(from, "platform");
    json_decref(j);
    return r;
}

static const struct rt_provider *platform_of(const struct rt_config *cfg, const char *backend)
{
    return !strcmp(backend, "cube") ? cfg->cube : cfg->e2b;
}

int rt_provider_write(const struct rt_config *cfg, const struct rt_spec *spec,
                      const char *backend, char **secret, struct sbx_err *err)
{
    *secret = NULL;
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider.json", spec->state_dir);
    const struct rt_provider *p = spec->provider;
    if (!p && access(path, F_OK) == 0) {
        /* A restart keeps what its first start was given; its secrets come from memory:
         * the platform's from cfg (a configuration's come as spec->provider, which sbxd
         * opens again from the configuration after its own restart). */
        const struct rt_provider *plat = platform_of(cfg, backend);
        if (plat && platform_conn(path))
            *secret = secret_of(plat);
        return 0;
    }
    bool platform = !p;
    if (!p)
        p = platform_of(cfg, backend);
    if (!p || !p->api_url || !p->template_id)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "the %s backend has no connection (api_url and template_id)", backend);
    /* No key and no network here: both reach the shim through its stdin (secret). */
    json_t *conn = json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:I}", "kind", backend, "api_url",
                             p->api_url, "key_from", platform ? "platform" : "config",
                             "sandbox_url", p->sandbox_url && *p->sandbox_url ? p->sandbox_url : NULL,
                             "domain", p->domain && *p->domain ? p->domain : NULL,
                             "http_timeout_ms", (json_int_t)p->http_timeout_ms);
    json_t *doc = json_pack("{s:o,s:s,s:I,s:{},s:{s:s},s:s}", "conn", conn, "template_id",
                            p->template_id, "timeout_s",
                            (json_int_t)(p->ttl_s > 0 ? p->ttl_s : RT_PROVIDER_TTL_DEFAULT_S),
                            "env", "metadata", PROVIDER_META_ID, spec->id, "agent_path",
                            cfg->agent_path);
    if (p->config_id && *p->config_id)
        json_object_set_new(json_object_get(doc, "metadata"), PROVIDER_META_CONFIG,
                            json_string(p->config_id));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text)
        return sbx_err_set(err, ENOMEM, "internal", "provider.json");
    int r = sbx_write_file_replace(path, text, strlen(text), 0600);
    free(text);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    _cleanup_free_ char *failed = sbx_xasprintf("%s/provider_error.json", spec->state_dir);
    (void)unlink(failed);
    *secret = secret_of(p);
    return 0;
}

char *rt_provider_cleanup_secret(const struct rt_config *cfg, const char *state_dir,
                                 const struct rt_provider *p)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider.json", state_dir);
    if (!platform_conn(path)) {
        if (!p || !p->api_key || !*p->api_key)
            return NULL;
        /* A delete needs the key only: the network rules stay in memory. */
        struct rt_provider key = {.api_key = p->api_key};
        return secret_of(&key);
    }
    const struct rt_provider *plat = platform_of(cfg, rt_backend_of(state_dir)->name);
    return plat ? secret_of(plat) : NULL;
}

int rt_provider_secret_pipe(const char *secret)
{
    size_t n = strlen(secret);
    if (n > RT_PROVIDER_SECRET_MAX)
        return -E2BIG;
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return -errno;
    int r = sbx_write_all(fd[1], secret, n);
    close(fd[1]);
    if (r < 0) {
        close(fd[0]);
        return r;
    }
    return fd[0];
}

/* A failure the shim wrote ({code, message}) into err: its negative errno, else 0. */
static int failure_in(const char *path, struct sbx_err *err)
{
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

int rt_provider_failure(const char *state_dir, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/provider_error.json", state_dir);
    return failure_in(path, err);
}

int rt_provider_pause_failure(const char *state_dir, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/" RT_PROVIDER_PAUSE_ERROR_FILE, state_dir);
    int r = failure_in(path, err);
    if (r < 0)
        (void)unlink(path); /* said once: the next pause starts clean */
    return r;
}
