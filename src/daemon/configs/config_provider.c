/* Import circle with config_doc.c (allowed inside a folder, docs/architecture.md#layering):
 * this is the provider part of the configuration document's parser, apart for its size;
 * config_doc.c calls it for `e2b` and `cube`, and it seals with config_doc_seal_or_keep. */
/* A configuration's `e2b` or `cube` object (document 002's sandbox_type e2b|cube,
 * docs/providers.md): the provider connection of its sandboxes. The api_key is sealed in the
 * store (context config:<id>:provider:api_key), masked in every answer, and a masked
 * placeholder on PUT keeps the stored one. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "config_doc.h"
#include "secrets.h"

#define BAD(...) sbx_err_set(err, EINVAL, "invalid_sandbox_config", __VA_ARGS__)
#define PROVIDER_STR_MAX 512
#define PROVIDER_KEY_MAX 1024
#define PROVIDER_HTTP_TIMEOUT_MAX 600
#define PROVIDER_TTL_MIN 60
#define PROVIDER_TTL_MAX (30 * 86400)
#define PROVIDER_DNS_MAX 4

static const char *const e2b_fields[] = {"api_key",        "template_id", "api_url",
                                         "sandbox_domain", "proxy_url",   "http_timeout_sec",
                                         "e2b_sandbox_ttl_seconds"};
static const char *const cube_fields[] = {"api_key",        "template_id", "api_url",
                                          "sandbox_domain", "proxy_url",   "http_timeout_sec",
                                          "cube_sandbox_ttl_seconds", "dns_servers"};

char *config_doc_provider_context(const char *id)
{
    return sbx_xasprintf("config:%s:provider:api_key", id);
}

static int opt_str(json_t *o, const char *kind, const char *f, bool url, const char **out,
                   struct sbx_err *err)
{
    json_t *v = json_object_get(o, f);
    *out = NULL;
    if (!v || json_is_null(v) || (json_is_string(v) && !json_string_length(v)))
        return 0;
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v) || strlen(s) > PROVIDER_STR_MAX ||
        strpbrk(s, " \t\r\n"))
        return BAD("%s.%s must be a string of at most %d characters", kind, f, PROVIDER_STR_MAX);
    if (url && strncmp(s, "http://", 7) && strncmp(s, "https://", 8))
        return BAD("%s.%s must be an http(s) URL", kind, f);
    *out = s;
    return 0;
}

static int opt_int(json_t *o, const char *kind, const char *f, long long min, long long max,
                   long long *out, struct sbx_err *err)
{
    json_t *v = json_object_get(o, f);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return BAD("%s.%s must be an integer from %lld to %lld", kind, f, min, max);
    *out = json_integer_value(v);
    return 0;
}

int config_doc_provider(const struct secrets *sec, const char *id, json_t *in, const json_t *stored,
                        const char *backend, json_t **out, struct sbx_err *err)
{
    *out = NULL;
    for (int i = 0; i < 2; i++) {
        const char *kind = i ? "cube" : "e2b";
        json_t *o = json_object_get(in, kind);
        bool mine = !strcmp(backend, kind);
        if (!o || json_is_null(o)) {
            if (mine)
                return BAD("sandbox_type %s needs an %s object with its api_key and template_id",
                           kind, kind);
            continue;
        }
        if (!mine)
            return BAD("%s is for sandbox_type %s only", kind, kind);
        if (!json_is_object(o))
            return BAD("%s must be an object", kind);
        const char *const *fields = i ? cube_fields : e2b_fields;
        size_t nfields = i ? SBX_ARRAY_SIZE(cube_fields) : SBX_ARRAY_SIZE(e2b_fields);
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
            bool known = false;
            for (size_t f = 0; f < nfields && !known; f++)
                known = !strcmp(k, fields[f]);
            if (!known)
                return BAD("%s.%.64s is not an %s field", kind, k, kind);
        }
        const char *tpl, *api, *domain, *proxy;
        long long http, ttl;
        int r;
        if ((r = opt_str(o, kind, "template_id", false, &tpl, err)) < 0 ||
            (r = opt_str(o, kind, "api_url", true, &api, err)) < 0 ||
            (r = opt_str(o, kind, "sandbox_domain", false, &domain, err)) < 0 ||
            (r = opt_str(o, kind, "proxy_url", true, &proxy, err)) < 0 ||
            (r = opt_int(o, kind, "http_timeout_sec", 1, PROVIDER_HTTP_TIMEOUT_MAX, &http, err)) < 0 ||
            (r = opt_int(o, kind, i ? "cube_sandbox_ttl_seconds" : "e2b_sandbox_ttl_seconds",
                         PROVIDER_TTL_MIN, PROVIDER_TTL_MAX, &ttl, err)) < 0)
            return r;
        if (!tpl)
            return BAD("%s.template_id is required: the provider's template", kind);
        /* E2B's own service is the default control plane; a cluster has no default. */
        if (!api && i)
            return BAD("cube.api_url is required: the cluster's control plane");
        json_t *kv = json_object_get(o, "api_key");
        const char *key = json_string_value(kv);
        if (kv && !json_is_null(kv) &&
            (!key || strlen(key) != json_string_length(kv) || strlen(key) > PROVIDER_KEY_MAX))
            return BAD("%s.api_key must be a string of at most %d characters", kind,
                       PROVIDER_KEY_MAX);
        if ((!key || !*key) && !i)
            return BAD("e2b.api_key is required");
        json_t *dns = json_object_get(o, "dns_servers");
        if (dns && !json_is_null(dns)) {
            size_t d;
            json_t *s;
            if (!json_is_array(dns) || json_array_size(dns) > PROVIDER_DNS_MAX)
                return BAD("cube.dns_servers must be at most %d addresses", PROVIDER_DNS_MAX);
            json_array_foreach(dns, d, s) if (!json_is_string(s) ||
                                               json_string_length(s) > 64) return BAD(
                "cube.dns_servers must be addresses");
        }
        json_t *res = json_pack("{s:s,s:s,s:s?,s:s?,s:I,s:I}", "template_id", tpl, "api_url",
                                api ? api : "https://api.e2b.app", "sandbox_domain", domain,
                                "proxy_url", proxy, "http_timeout_sec", (json_int_t)http,
                                i ? "cube_sandbox_ttl_seconds" : "e2b_sandbox_ttl_seconds",
                                (json_int_t)ttl);
        if (dns && json_is_array(dns))
            json_object_set(res, "dns_servers", dns);
        if (key && *key) {
            _cleanup_free_ char *ctx = config_doc_provider_context(id);
            const char *old =
                json_string_value(json_object_get(json_object_get(stored, kind), "api_key"));
            char *sealed = NULL;
            if ((r = config_doc_seal_or_keep(sec, ctx, "api_key", key, old, &sealed, err)) < 0) {
                json_decref(res);
                return r;
            }
            json_object_set_new(res, "api_key", json_string(sealed));
            free(sealed);
        }
        *out = res;
    }
    return 0;
}

void config_doc_provider_mask(json_t *doc)
{
    for (int i = 0; i < 2; i++) {
        json_t *o = json_object_get(doc, i ? "cube" : "e2b");
        if (json_object_get(o, "api_key"))
            json_object_set_new(o, "api_key", json_string(SECRETS_MASK));
    }
}

int config_doc_provider_open(const struct secrets *sec, const char *id, const json_t *stored,
                             json_t **out, struct sbx_err *err)
{
    *out = NULL;
    const char *kind = json_object_get(stored, "cube") ? "cube" : "e2b";
    json_t *o = json_object_get(stored, kind);
    if (!o)
        return 0;
    json_t *res = json_deep_copy(o);
    json_object_set_new(res, "kind", json_string(kind));
    const char *sealed = json_string_value(json_object_get(o, "api_key"));
    if (sealed) {
        _cleanup_free_ char *ctx = config_doc_provider_context(id);
        char *plain = NULL;
        int r = secrets_open_value(sec, ctx, sealed, &plain, err);
        if (r < 0) {
            json_decref(res);
            return r;
        }
        json_object_set_new(res, "api_key", json_string(plain));
        secrets_drop(plain);
    }
    *out = res;
    return 0;
}
