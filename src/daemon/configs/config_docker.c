/* Import circle with config_doc.c (allowed inside a folder, docs/architecture.md#layering):
 * this is the docker part of the configuration document's parser, apart for its size;
 * config_doc.c calls it for `docker`, and it takes the ceilings config_doc.h defines. */
/* A configuration's `docker` object (document 002's docker sandbox_type, docs/configs.md):
 * the container options of its sandboxes on the docker backend (docs/runtime.md "Docker"),
 * and its limits as the configuration's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../runtime/docker_api.h"
#include "config_doc.h"

#define BAD(...) sbx_err_set(err, EINVAL, "invalid_sandbox_config", __VA_ARGS__)
#define DOCKER_IMAGE_MAX 255
#define DOCKER_RUNTIME_MAX 32
#define DOCKER_PATH_MAX 1024
#define DOCKER_IDLE_TTL_MAX 86400
#define DOCKER_HTTP_TIMEOUT_MAX 3600
#define DOCKER_HOST_MAX 255

static const char *const docker_fields[] = {
    "image",         "host",       "tls_cert_path",  "cpu_limit",     "memory_limit_mb",
    "pids_limit",    "network_mode", "runtime",      "idle_ttl_seconds", "http_timeout_sec",
};

static bool charset_ok(const char *s, size_t max, const char *extra)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || strchr(extra, s[i])))
            return false;
    return true;
}

static int opt_int(json_t *d, const char *f, long long min, long long max, long long *out,
                   struct sbx_err *err)
{
    json_t *v = json_object_get(d, f);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return BAD("docker.%s must be an integer from %lld to %lld", f, min, max);
    *out = json_integer_value(v);
    return 0;
}

/* A remote engine (docs/runtime.md "Docker"): tcp://HOST:PORT, always with TLS client
 * certificates in Docker's layout, which sbxd must be able to read. */
static int remote_engine(const char *host, const char *tls, struct sbx_err *err)
{
    const char *addr = host + strlen(DOCKER_TCP_PREFIX);
    const char *colon = strrchr(addr, ':');
    if (!docker_host_remote(host) || strlen(host) > DOCKER_HOST_MAX || !colon || colon == addr ||
        strlen(colon + 1) > 5 || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
        atoi(colon + 1) < 1 || atoi(colon + 1) > 65535)
        return BAD("docker.host must be empty (this host's engine) or tcp://HOST:PORT");
    for (const char *c = addr; c < colon; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-[]:", *c))
            return BAD("docker.host must be empty (this host's engine) or tcp://HOST:PORT");
    if (!tls || tls[0] != '/')
        return BAD("docker.host %s needs tls_cert_path: the absolute path of a directory "
                   "holding " DOCKER_TLS_CA ", " DOCKER_TLS_CERT " and " DOCKER_TLS_KEY,
                   host);
    static const char *const files[] = {DOCKER_TLS_CA, DOCKER_TLS_CERT, DOCKER_TLS_KEY};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *f = sbx_xasprintf("%s/%s", tls, files[i]);
        if (access(f, R_OK) < 0)
            return BAD("docker.tls_cert_path: %s: %s", f, strerror(errno));
    }
    return 0;
}

int config_doc_docker(json_t *in, const char *backend, const struct config_ceilings *ceil,
                      json_t *limits, json_t **out, struct sbx_err *err)
{
    *out = NULL;
    json_t *d = json_object_get(in, "docker");
    bool docker = !strcmp(backend, "docker");
    if (!d || json_is_null(d)) {
        if (docker)
            return BAD("backend docker needs a docker object with its image");
        return 0;
    }
    if (!docker)
        return BAD("docker is for backend docker only");
    if (!json_is_object(d))
        return BAD("docker must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(docker_fields) && !known; i++)
            known = !strcmp(k, docker_fields[i]);
        if (!known)
            return BAD("docker.%.64s is not a docker field", k);
    }
    const char *image = json_string_value(json_object_get(d, "image"));
    if (!charset_ok(image, DOCKER_IMAGE_MAX, "._-/:@"))
        return BAD("docker.image must name an image on the engine ([A-Za-z0-9._-/:@], at most "
                   "%d)", DOCKER_IMAGE_MAX);
    json_t *hv = json_object_get(d, "host");
    const char *host = json_string_value(hv);
    if (hv && !json_is_null(hv) && !host)
        return BAD("docker.host must be a string");
    json_t *tv = json_object_get(d, "tls_cert_path");
    const char *tls = json_string_value(tv);
    if (tv && !json_is_null(tv) && (!tls || strlen(tls) > DOCKER_PATH_MAX))
        return BAD("docker.tls_cert_path must be a path");
    if (host && *host) {
        int r = remote_engine(host, tls, err);
        if (r < 0)
            return r;
    } else {
        host = "";
    }
    const char *net = json_string_value(json_object_get(d, "network_mode"));
    if (json_object_get(d, "network_mode") && !json_is_null(json_object_get(d, "network_mode"))) {
        if (!net || (strcmp(net, "none") && strcmp(net, "bridge")))
            return BAD("docker.network_mode must be \"none\" or \"bridge\"");
        if (!strcmp(net, "bridge"))
            return BAD("docker.network_mode bridge would give the container a way out around "
                       "sbx's egress proxy: use none and the configuration's network policy");
    }
    json_t *rv = json_object_get(d, "runtime");
    const char *runtime = json_string_value(rv);
    if (rv && !json_is_null(rv) && !charset_ok(runtime, DOCKER_RUNTIME_MAX, "_-."))
        return BAD("docker.runtime must be a runtime the engine has (runc, runsc)");
    long long mem, pids, idle, http;
    int r;
    if ((r = opt_int(d, "memory_limit_mb", 64, ceil->memory_mb, &mem, err)) < 0 ||
        (r = opt_int(d, "pids_limit", 16, ceil->pids, &pids, err)) < 0 ||
        (r = opt_int(d, "idle_ttl_seconds", 0, DOCKER_IDLE_TTL_MAX, &idle, err)) < 0 ||
        (r = opt_int(d, "http_timeout_sec", 0, DOCKER_HTTP_TIMEOUT_MAX, &http, err)) < 0)
        return r;
    json_t *cv = json_object_get(d, "cpu_limit");
    long long cpu = 0;
    if (cv && !json_is_null(cv)) {
        double cores = json_number_value(cv);
        cpu = (long long)(cores * 1000 + 0.5); /* to the millicore */
        if (!json_is_number(cv) || cpu < 100 || cpu > ceil->cpu_millicores)
            return BAD("docker.cpu_limit must be cores from 0.1 to %.1f",
                       (double)ceil->cpu_millicores / 1000);
    }
    /* The engine's limits are the configuration's: what its sandboxes get, and narrow. */
    if (mem)
        json_object_set_new(limits, "memory_mb", json_integer(mem));
    if (pids)
        json_object_set_new(limits, "pids", json_integer(pids));
    if (cpu)
        json_object_set_new(limits, "cpu_millicores", json_integer(cpu));
    *out = json_pack("{s:s,s:s,s:s?,s:I,s:I,s:I,s:s,s:s?,s:I,s:I}", "image", image, "host", host,
                     "tls_cert_path", tls, "cpu_limit",
                     (json_int_t)0, "memory_limit_mb", (json_int_t)mem, "pids_limit",
                     (json_int_t)pids, "network_mode", "none", "runtime", runtime,
                     "idle_ttl_seconds", (json_int_t)idle, "http_timeout_sec", (json_int_t)http);
    if (cpu)
        json_object_set_new(*out, "cpu_limit", json_real((double)cpu / 1000));
    return 0;
}
