/* E2B-protocol providers over libcurl (provider_api.h, docs/providers.md). */
#include "provider_api.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "curlx.h"

#define ENVELOPE_HEAD 5 /* Connect: flags, then the length (big endian) */
#define ENVELOPE_END_STREAM 0x02
/* A stream's keepalives come this often; twice that without a byte means the provider died. */
#define STREAM_KEEPALIVE_S 30
#define STREAM_DEAD_S (2 * STREAM_KEEPALIVE_S)

int provider_conn_from_json(json_t *obj, struct provider_conn *out, struct sbx_err *err)
{
    *out = (struct provider_conn){
        .kind = json_string_value(json_object_get(obj, "kind")),
        .api_url = json_string_value(json_object_get(obj, "api_url")),
        .api_key = json_string_value(json_object_get(obj, "api_key")),
        .sandbox_url = json_string_value(json_object_get(obj, "sandbox_url")),
        .domain = json_string_value(json_object_get(obj, "domain")),
        .http_timeout_ms = (long)json_integer_value(json_object_get(obj, "http_timeout_ms")),
    };
    if (!out->api_url || strncmp(out->api_url, "http", 4))
        return sbx_err_set(err, EINVAL, "invalid_config", "the provider has no http(s) api_url");
    if (out->sandbox_url && strncmp(out->sandbox_url, "http", 4))
        return sbx_err_set(err, EINVAL, "invalid_config", "the provider's sandbox_url is not http(s)");
    return 0;
}

static long timeout_of(const struct provider_conn *c)
{
    return c->http_timeout_ms > 0 ? c->http_timeout_ms : PROVIDER_HTTP_TIMEOUT_MS_DEFAULT;
}

/* The provider's transport failure as an sbx error. */
static int transport_error(CURLcode rc, const char *url, struct sbx_err *err)
{
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return sbx_err_set(err, ETIMEDOUT, "provider_timeout", "the provider did not answer %s in time: %s",
                           url, curl_easy_strerror(rc));
    return sbx_err_set(err, ECONNREFUSED, "provider_unreachable", "the provider at %s: %s", url,
                       curl_easy_strerror(rc));
}

static const char *message_of(const char *resp, char *buf, size_t size)
{
    json_t *j = resp ? json_loads(resp, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(j, "message"));
    if (m)
        snprintf(buf, size, "%s", m);
    else
        snprintf(buf, size, "%.*s", (int)strcspn(resp ? resp : "", "\r\n"), resp ? resp : "");
    json_decref(j);
    return buf;
}

int provider_status_error(long status, const char *resp, const char *what, struct sbx_err *err)
{
    char msg[512];
    message_of(resp, msg, sizeof(msg));
    if (status == 401 || status == 403)
        return sbx_err_set(err, EACCES, "provider_auth_failed",
                           "the provider refused the credentials (%s: HTTP %ld): %s", what, status, msg);
    if (status == 429)
        return sbx_err_set(err, EAGAIN, "provider_rate_limited",
                           "the provider is rate limiting (%s: HTTP 429): %s", what, msg);
    if (status == 408 || status == 504)
        return sbx_err_set(err, ETIMEDOUT, "provider_timeout", "the provider timed out (%s: HTTP %ld): %s",
                           what, status, msg);
    return sbx_err_set(err, EIO, "provider_error", "the provider answered %s with HTTP %ld: %s", what,
                       status, msg);
}

/* One request to url; hdrs taken. next (NULL: not wanted) gets the answer's X-Next-Token,
 * E2B's list pagination, or "". */
static int perform(const struct provider_conn *c, const char *method, const char *url,
                   struct curl_slist *hdrs, const char *body, int upload_fd, long *status,
                   char **resp, char next[PROVIDER_TOKEN_MAX], struct sbx_err *err)
{
    *status = 0;
    if (resp)
        *resp = NULL;
    _cleanup_slist_ struct curl_slist *h = hdrs;
    _cleanup_curl_ CURL *e = curl_easy_init();
    if (!e)
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    struct curlx_body b = {.max = PROVIDER_RESP_MAX};
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, curlx_body_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_of(c));
    if (upload_fd >= 0) {
        h = curl_slist_append(h, "Content-Type: application/octet-stream");
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, curlx_fd_read_cb);
        curl_easy_setopt(e, CURLOPT_READDATA, &upload_fd);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10 * timeout_of(c));
    } else if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(e);
    if (rc != CURLE_OK) {
        free(b.data);
        return transport_error(rc, url, err);
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    struct curl_header *nh;
    if (next)
        snprintf(next, PROVIDER_TOKEN_MAX, "%s",
                 curl_easy_header(e, "X-Next-Token", 0, CURLH_HEADER, -1, &nh) == CURLHE_OK &&
                         strlen(nh->value) < PROVIDER_TOKEN_MAX
                     ? nh->value
                     : "");
    if (resp)
        *resp = b.data ? b.data : sbx_xstrdup("");
    else
        free(b.data);
    return 0;
}

static struct curl_slist *api_headers(const struct provider_conn *c)
{
    struct curl_slist *h = NULL;
    if (c->api_key && *c->api_key) {
        _cleanup_free_ char *k = sbx_xasprintf("X-API-KEY: %s", c->api_key);
        h = curl_slist_append(h, k);
    }
    return h;
}

int provider_call(const struct provider_conn *c, const char *method, const char *path,
                  json_t *body, long *status, char **resp, struct sbx_err *err)
{
    _cleanup_free_ char *url = sbx_xasprintf("%s%s", c->api_url, path);
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    return perform(c, method, url, api_headers(c), text, -1, status, resp, NULL, err);
}

/* A control-plane answer naming a sandbox (create, connect) into out. */
static int sandbox_answer(const char *resp, const char *what, struct provider_sandbox *out,
                          struct sbx_err *err)
{
    json_t *j = json_loads(resp, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "sandboxID"));
    const char *tok = json_string_value(json_object_get(j, "envdAccessToken"));
    const char *dom = json_string_value(json_object_get(j, "domain"));
    if (!id || !*id || strlen(id) >= sizeof(out->id) || (tok && strlen(tok) >= sizeof(out->token)) ||
        (dom && strlen(dom) >= sizeof(out->domain))) {
        json_decref(j);
        return sbx_err_set(err, EPROTO, "provider_error",
                           "the provider's %s answer has no usable sandboxID", what);
    }
    snprintf(out->id, sizeof(out->id), "%s", id);
    snprintf(out->token, sizeof(out->token), "%s", tok ? tok : "");
    snprintf(out->domain, sizeof(out->domain), "%s", dom ? dom : "");
    json_decref(j);
    return 0;
}

int provider_sandbox_create(const struct provider_conn *c, const char *template_id,
                            long timeout_s, json_t *env, json_t *metadata, json_t *network,
                            struct provider_sandbox *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    json_t *req = json_pack("{s:s,s:I,s:O?,s:O?,s:b}", "templateID", template_id, "timeout",
                            (json_int_t)timeout_s, "envVars", env, "metadata", metadata,
                            "secure", 1);
    if (network)
        json_object_set(req, "network", network);
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = provider_call(c, "POST", "/sandboxes", req, &status, &resp, err);
    json_decref(req);
    if (r < 0)
        return r;
    if (status != 200 && status != 201)
        return provider_status_error(status, resp, "POST /sandboxes", err);
    return sandbox_answer(resp, "POST /sandboxes", out, err);
}

int provider_sandbox_connect(const struct provider_conn *c, const char *id, long timeout_s,
                             struct provider_sandbox *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    _cleanup_free_ char *path = sbx_xasprintf("/sandboxes/%s/connect", id);
    json_t *req = json_pack("{s:I}", "timeout", (json_int_t)timeout_s);
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = provider_call(c, "POST", path, req, &status, &resp, err);
    json_decref(req);
    if (r < 0)
        return r;
    if (status == 404)
        return sbx_err_set(err, ENOENT, "provider_sandbox_gone",
                           "the provider no longer has sandbox %s", id);
    if (status != 200 && status != 201)
        return provider_status_error(status, resp, "POST /sandboxes/{id}/connect", err);
    return sandbox_answer(resp, "POST /sandboxes/{id}/connect", out, err);
}

int provider_sandbox_pause(const struct provider_conn *c, const char *id, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("/sandboxes/%s/pause", id);
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = provider_call(c, "POST", path, NULL, &status, &resp, err);
    if (r < 0)
        return r;
    if (status == 200 || status == 204)
        return 0;
    /* 409 is E2B's "already paused", which is what was asked, but also a refusal (a
     * sandbox the provider cannot pause as it is): its state tells which. */
    if (status == 409) {
        _cleanup_free_ char *get = sbx_xasprintf("/sandboxes/%s", id);
        long st;
        _cleanup_free_ char *info = NULL;
        if (provider_call(c, "GET", get, NULL, &st, &info, err) == 0 && st == 200) {
            json_t *j = json_loads(info, 0, NULL);
            const char *state = json_string_value(json_object_get(j, "state"));
            bool paused = state && !strcmp(state, "paused");
            json_decref(j);
            if (paused)
                return 0;
        }
    }
    return provider_status_error(status, resp, "POST /sandboxes/{id}/pause", err);
}

int provider_template_list(const struct provider_conn *c, json_t **out, struct sbx_err *err)
{
    *out = NULL;
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = provider_call(c, "GET", "/templates", NULL, &status, &resp, err);
    if (r < 0)
        return r;
    if (status != 200)
        return provider_status_error(status, resp, "GET /templates", err);
    json_t *j = json_loads(resp, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        return sbx_err_set(err, EPROTO, "provider_error",
                           "the provider's GET /templates is not a list");
    }
    *out = j;
    return 0;
}

int provider_sandbox_delete(const struct provider_conn *c, const char *id, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("/sandboxes/%s", id);
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = provider_call(c, "DELETE", path, NULL, &status, &resp, err);
    if (r < 0)
        return r;
    if (status != 200 && status != 204 && status != 404)
        return provider_status_error(status, resp, "DELETE /sandboxes/{id}", err);
    return 0;
}

int provider_sandbox_list(const struct provider_conn *c, json_t **out, struct sbx_err *err)
{
    *out = NULL;
    json_t *all = json_array();
    char next[PROVIDER_TOKEN_MAX] = "";
    /* E2B's v1 GET /sandboxes lists running sandboxes only; v2 lists the states asked
     * for (comma-separated, as E2B's SDKs send them), a page at a time. */
    for (int page = 0; page < PROVIDER_LIST_PAGES_MAX; page++) {
        char *esc = next[0] ? curl_easy_escape(NULL, next, 0) : NULL;
        _cleanup_free_ char *url =
            sbx_xasprintf("%s/v2/sandboxes?state=running,paused&limit=%d%s%s", c->api_url,
                          PROVIDER_LIST_PAGE, esc ? "&nextToken=" : "", esc ? esc : "");
        curl_free(esc);
        long status;
        _cleanup_free_ char *resp = NULL;
        int r = perform(c, "GET", url, api_headers(c), NULL, -1, &status, &resp, next, err);
        if (r == 0 && status != 200)
            r = provider_status_error(status, resp, "GET /v2/sandboxes", err);
        json_t *j = r == 0 ? json_loads(resp, 0, NULL) : NULL;
        if (r == 0 && !json_is_array(j))
            r = sbx_err_set(err, EPROTO, "provider_error",
                            "the provider's GET /v2/sandboxes is not a list");
        if (r < 0) {
            json_decref(j);
            json_decref(all);
            return r;
        }
        json_array_extend(all, j);
        json_decref(j);
        if (!next[0]) {
            *out = all;
            return 0;
        }
    }
    json_decref(all);
    return sbx_err_set(err, E2BIG, "provider_error",
                       "the provider lists more than %d pages of sandboxes",
                       PROVIDER_LIST_PAGES_MAX);
}

/* ---- the data plane ---- */

static char *envd_url(const struct provider_conn *c, const struct provider_sandbox *sb,
                      const char *path)
{
    if (c->sandbox_url)
        return sbx_xasprintf("%s%s", c->sandbox_url, path);
    const char *dom = c->domain && *c->domain ? c->domain : sb->domain;
    return sbx_xasprintf("https://%d-%s.%s%s", PROVIDER_ENVD_PORT, sb->id, dom, path);
}

static struct curl_slist *envd_headers(const struct provider_sandbox *sb)
{
    struct curl_slist *h = NULL;
    _cleanup_free_ char *id = sbx_xasprintf("E2b-Sandbox-Id: %s", sb->id);
    _cleanup_free_ char *port = sbx_xasprintf("E2b-Sandbox-Port: %d", PROVIDER_ENVD_PORT);
    h = curl_slist_append(h, id);
    h = curl_slist_append(h, port);
    if (sb->token[0]) {
        _cleanup_free_ char *tok = sbx_xasprintf("X-Access-Token: %s", sb->token);
        h = curl_slist_append(h, tok);
    }
    return h;
}

int provider_upload(const struct provider_conn *c, const struct provider_sandbox *sb,
                    const char *path, int fd, struct sbx_err *err)
{
    _cleanup_curl_ CURL *e = curl_easy_init();
    if (!e)
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    char *q = curl_easy_escape(e, path, 0);
    _cleanup_free_ char *rel = sbx_xasprintf("/files?path=%s", q);
    curl_free(q);
    _cleanup_free_ char *url = envd_url(c, sb, rel);
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = perform(c, "POST", url, envd_headers(sb), NULL, fd, &status, &resp, NULL, err);
    if (r < 0)
        return r;
    if (status != 200 && status != 204)
        return provider_status_error(status, resp, "envd POST /files", err);
    return 0;
}

int provider_rpc(const struct provider_conn *c, const struct provider_sandbox *sb,
                 const char *method, json_t *msg, json_t **out, struct sbx_err *err)
{
    if (out)
        *out = NULL;
    _cleanup_free_ char *rel = sbx_xasprintf("/%s", method);
    _cleanup_free_ char *url = envd_url(c, sb, rel);
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
    struct curl_slist *h = envd_headers(sb);
    h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    long status;
    _cleanup_free_ char *resp = NULL;
    int r = perform(c, "POST", url, h, text, -1, &status, &resp, NULL, err);
    if (r < 0)
        return r;
    json_t *j = json_loads(resp, 0, NULL);
    if (status != 200) {
        const char *code = json_string_value(json_object_get(j, "code"));
        const char *m = json_string_value(json_object_get(j, "message"));
        if (!code) {
            json_decref(j);
            return provider_status_error(status, resp, method, err);
        }
        sbx_err_set(err, EIO, "provider_error", "envd %s: %s: %s", method, code, m ? m : "");
        /* The Connect code, for callers that retry on resource_exhausted. */
        snprintf(err->code, sizeof(err->code), "%s", code);
        json_decref(j);
        return -EIO;
    }
    if (out)
        *out = j;
    else
        json_decref(j);
    return 0;
}

struct stream_ctx {
    unsigned char *buf;
    size_t len;
    provider_msg_fn on_msg;
    void *data;
    int stop;           /* on_msg's non-zero answer */
    json_t *end_error;  /* the end-stream's error */
    bool bad;
};

static size_t on_stream(char *ptr, size_t size, size_t n, void *data)
{
    struct stream_ctx *s = data;
    size_t len = size * n;
    s->buf = sbx_xrealloc(s->buf, s->len + len);
    memcpy(s->buf + s->len, ptr, len);
    s->len += len;
    size_t off = 0;
    while (s->len - off >= ENVELOPE_HEAD) {
        const unsigned char *h = s->buf + off;
        size_t mlen = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
        if (mlen > PROVIDER_ENVELOPE_MAX) {
            s->bad = true;
            return 0; /* ends the transfer */
        }
        if (s->len - off < ENVELOPE_HEAD + mlen)
            break;
        json_t *msg = json_loadb((const char *)h + ENVELOPE_HEAD, mlen, 0, NULL);
        off += ENVELOPE_HEAD + mlen;
        if (!msg) {
            s->bad = true;
            return 0;
        }
        if (h[0] & ENVELOPE_END_STREAM) {
            json_t *e = json_object_get(msg, "error");
            if (e && !s->end_error)
                s->end_error = json_incref(e);
        } else if ((s->stop = s->on_msg(msg, s->data)) != 0) {
            json_decref(msg);
            return 0;
        }
        json_decref(msg);
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
    return len;
}

int provider_stream(const struct provider_conn *c, const struct provider_sandbox *sb,
                    const char *method, json_t *msg, provider_msg_fn on_msg, void *data,
                    struct sbx_err *err)
{
    _cleanup_curl_ CURL *e = curl_easy_init();
    if (!e)
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    _cleanup_free_ char *rel = sbx_xasprintf("/%s", method);
    _cleanup_free_ char *url = envd_url(c, sb, rel);
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
    size_t n = strlen(text);
    _cleanup_free_ unsigned char *req = sbx_xmalloc(ENVELOPE_HEAD + n);
    req[0] = 0;
    req[1] = (unsigned char)(n >> 24), req[2] = (unsigned char)(n >> 16);
    req[3] = (unsigned char)(n >> 8), req[4] = (unsigned char)n;
    memcpy(req + ENVELOPE_HEAD, text, n);
    _cleanup_slist_ struct curl_slist *h = envd_headers(sb);
    h = curl_slist_append(h, "Content-Type: application/connect+json");
    h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    char ka[64];
    snprintf(ka, sizeof(ka), "Keepalive-Ping-Interval: %d", STREAM_KEEPALIVE_S);
    h = curl_slist_append(h, ka);
    struct stream_ctx s = {.on_msg = on_msg, .data = data};
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)(ENVELOPE_HEAD + n));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_of(c));
    /* No overall bound (the agent lives as long as the sandbox), but a provider gone
     * silent past two keepalives is dead. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)STREAM_DEAD_S);
    CURLcode rc = curl_easy_perform(e);
    free(s.buf);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    int r = 0;
    if (s.stop)
        r = s.stop;
    else if (s.bad)
        r = sbx_err_set(err, EPROTO, "provider_error", "envd %s: a malformed stream", method);
    else if (rc != CURLE_OK)
        r = transport_error(rc, url, err);
    else if (status != 200)
        r = provider_status_error(status, NULL, method, err);
    else if (s.end_error)
        r = sbx_err_set(err, EIO, "provider_error", "envd %s: %s: %s", method,
                        json_string_value(json_object_get(s.end_error, "code")) ?: "unknown",
                        json_string_value(json_object_get(s.end_error, "message")) ?: "");
    json_decref(s.end_error);
    return r;
}
