/* HTTP for libsbx: one curl easy handle per client, reused (keep-alive) by every call. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/text.h"
#include "../common/util.h"
#include "client_priv.h"
#include "sbx.h"
#include "sse.h"

struct sbx_client *sbx_client_new(const char *url, const char *key)
{
    static int curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return NULL;
        curl_ready = 1;
    }
    struct sbx_client *c = sbx_xcalloc(1, sizeof(*c));
    size_t n = strlen(url);
    while (n && url[n - 1] == '/')
        n--;
    c->url = sbx_xasprintf("%.*s", (int)n, url);
    c->key = key ? sbx_xstrdup(key) : NULL;
    c->curl = curl_easy_init();
    if (!c->curl) {
        sbx_client_free(c);
        return NULL;
    }
    return c;
}

void sbx_client_free(struct sbx_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->url);
    if (c->key) {
        /* The key should not linger in freed memory. */
        memset(c->key, 0, strlen(c->key));
        free(c->key);
    }
    free(c);
}

struct sbx_client *sbx_client_dup(const struct sbx_client *c)
{
    return sbx_client_new(c->url, c->key);
}

const char *sbx_client_request_id(const struct sbx_client *c)
{
    return c->request_id;
}

long sbx_client_status(const struct sbx_client *c)
{
    return c->status;
}

char *sbx_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *r = sbx_xstrdup(e ? e : "");
    curl_free(e);
    return r;
}

char *sbx_escape_path(const char *path)
{
    size_t cap = strlen(path) * 3 + 1, len = 0;
    char *out = sbx_xmalloc(cap);
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *e = curl_easy_escape(NULL, p, (int)n);
        size_t en = e ? strlen(e) : 0;
        memcpy(out + len, e ? e : "", en);
        len += en;
        curl_free(e);
        if (!slash)
            break;
        out[len++] = '/';
        p = slash + 1;
    }
    out[len] = '\0';
    return out;
}

/* --- one transfer ------------------------------------------------------------------- */

struct xfer {
    struct sbx_client *c;
    /* The answer's body when it is buffered (JSON and error answers). */
    char *body;
    size_t body_len, body_cap, body_max;
    /* Streaming sinks: an fd for downloads, an SSE parser for streams. */
    int out_fd;
    EVP_MD_CTX *md;
    struct sse_parser *sse;
    int decided; /* the status is known and the sink chosen */
    int to_sink; /* 2xx: the body goes to the sink, else to the buffer */
    int sink_err;
    sbx_tick_fn on_tick;
    void *ud;
    int cancelled;
    /* Uploads. */
    int in_fd;
    long long in_size;
};

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    static const char name[] = "x-request-id:";
    if (len > sizeof(name) - 1 && !strncasecmp(buf, name, sizeof(name) - 1)) {
        const char *v = buf + sizeof(name) - 1;
        size_t vl = len - (sizeof(name) - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl >= sizeof(x->c->request_id))
            vl = sizeof(x->c->request_id) - 1;
        memcpy(x->c->request_id, v, vl);
        x->c->request_id[vl] = '\0';
    }
    return len;
}

static void decide(struct xfer *x)
{
    if (x->decided)
        return;
    x->decided = 1;
    long status = 0;
    curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &status);
    x->to_sink = status >= 200 && status < 300;
    if (x->to_sink && x->sse) {
        /* A JSON error answer with a 2xx status is not possible, but a non-stream answer
         * to a stream request is (a replayed idempotent request, a proxy): buffer it. */
        const char *ct = NULL;
        curl_easy_getinfo(x->c->curl, CURLINFO_CONTENT_TYPE, &ct);
        if (!ct || !strstr(ct, "text/event-stream"))
            x->to_sink = 0;
    }
    if (!x->to_sink)
        x->body_max = x->body_max ? x->body_max : SBX_ERROR_BODY_MAX;
}

static int sse_event(void *ud, const char *data, size_t len);

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    decide(x);
    if (x->to_sink && x->sse) {
        int r = sse_feed(x->sse, buf, len);
        if (r) {
            x->sink_err = r;
            return 0;
        }
        return len;
    }
    if (x->to_sink && x->out_fd >= 0) {
        if (x->md)
            EVP_DigestUpdate(x->md, buf, len);
        int r = sbx_write_all(x->out_fd, buf, len);
        if (r < 0) {
            x->sink_err = r;
            return 0;
        }
        return len;
    }
    size_t keep = len;
    if (x->body_len + keep > x->body_max) {
        if (x->to_sink) {
            x->sink_err = -EMSGSIZE;
            return 0;
        }
        keep = x->body_max - x->body_len; /* an error body: keep its start */
    }
    if (x->body_len + keep + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        while (cap < x->body_len + keep + 1)
            cap *= 2;
        x->body = sbx_xrealloc(x->body, cap);
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, buf, keep);
    x->body_len += keep;
    x->body[x->body_len] = '\0';
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    for (;;) {
        ssize_t r = read(x->in_fd, buf, size * n);
        if (r >= 0)
            return (size_t)r;
        if (errno != EINTR) {
            x->sink_err = -errno;
            return CURL_READFUNC_ABORT;
        }
    }
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct xfer *x = ud;
    if (!x->on_tick)
        return 0;
    long long done = ultotal ? ulnow : dlnow, total = ultotal ? ultotal : dltotal;
    if (x->on_tick(x->ud, done, total)) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

/* Fill err from an error answer's body: the API's {"error":{code,message}} when it is
 * one, else the status alone. */
static int api_error(struct xfer *x, long status, struct sbx_err *err)
{
    json_t *j = x->body ? json_loadb(x->body, x->body_len, 0, NULL) : NULL;
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    int r = sbx_err_set(err, SBX_E_API, code ? code : "http_error", "%s",
                        msg ? msg : "the server answered with an unexpected status");
    if (!code && err)
        snprintf(err->msg, sizeof(err->msg), "HTTP status %ld without an API error", status);
    json_decref(j);
    return r;
}

static void xfer_release(struct xfer *x)
{
    free(x->body);
    if (x->md)
        EVP_MD_CTX_free(x->md);
}

struct stream_ud {
    const struct sbx_stream_opts *opts;
    int stopped;
};

static int sse_event(void *ud, const char *data, size_t len)
{
    struct stream_ud *s = ud;
    json_t *ev = json_loadb(data, len, 0, NULL);
    if (!ev)
        return -EBADMSG;
    int r = s->opts->on_event(s->opts->ud, ev);
    json_decref(ev);
    if (r) {
        s->stopped = 1;
        return 1;
    }
    return 0;
}

/* Run one request on the client's handle. url is absolute; key is sent when with_key. */
static int perform(struct sbx_client *c, const char *method, const char *url, bool with_key,
                   struct curl_slist *hdrs, const char *post, struct xfer *x, struct sbx_err *err)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    c->request_id[0] = '\0';
    c->status = 0;
    x->c = c;
    struct curl_slist *all = hdrs;
    _cleanup_free_ char *auth = NULL;
    if (with_key && c->key) {
        auth = sbx_xasprintf("Authorization: Bearer %s", c->key);
        all = curl_slist_append(all, auth);
        memset(auth, 0, strlen(auth));
    }
    /* libcurl would otherwise wait for a 100 Continue before sending an upload. */
    all = curl_slist_append(all, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, all);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* The URL comes from a config file or the environment: HTTP(S) only, no redirects. */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sbx-cli/1");
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (post) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(post));
    }
    if (x->in_fd >= 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, x);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->in_size);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(all);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
    if (x->cancelled)
        return sbx_err_set(err, ECANCELED, "cancelled", "cancelled");
    if (x->sink_err == 1)
        return 0; /* the event callback asked to stop */
    if (x->sink_err)
        return sbx_err_set(err, -x->sink_err, "local_error", "%s: %s",
                           x->sse ? "reading the event stream" : "writing the answer",
                           x->sink_err == -EMSGSIZE ? "too large" : strerror(-x->sink_err));
    if (rc != CURLE_OK) {
        if (c->status == 0)
            return sbx_err_set(err, SBX_E_CONN, "connection_failed", "%s: %s", c->url,
                               curl_easy_strerror(rc));
        return sbx_err_set(err, EIO, "connection_failed", "the answer was cut: %s",
                           curl_easy_strerror(rc));
    }
    decide(x);
    if (c->status < 200 || c->status >= 300)
        return api_error(x, c->status, err);
    return 0;
}

static char *full_url(struct sbx_client *c, const char *path)
{
    return sbx_xasprintf("%s%s", c->url, path);
}

/* A request whose body (if any) is JSON; accept is the Accept header line. */
static int perform_json(struct sbx_client *c, const char *method, const char *path, json_t *body,
                        const char *accept, struct xfer *x, struct sbx_err *err)
{
    _cleanup_free_ char *url = full_url(c, path);
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *h = curl_slist_append(NULL, accept);
    if (text)
        h = curl_slist_append(h, "Content-Type: application/json");
    return perform(c, method, url, true, h, text, x, err);
}

int sbx_call(struct sbx_client *c, const char *method, const char *path, json_t *body, json_t **out,
             struct sbx_err *err)
{
    if (out)
        *out = NULL;
    struct xfer x = {.out_fd = -1, .in_fd = -1, .body_max = SBX_JSON_BODY_MAX};
    int r = perform_json(c, method, path, body, "Accept: application/json", &x, err);
    if (r == 0 && out && x.body_len) {
        json_error_t je;
        *out = json_loadb(x.body, x.body_len, 0, &je);
        if (!*out)
            r = sbx_err_set(err, EBADMSG, "bad_answer", "the server's answer is not JSON: %s",
                            je.text);
    }
    xfer_release(&x);
    return r;
}

int sbx_stream(struct sbx_client *c, const char *method, const char *path, json_t *body,
               const struct sbx_stream_opts *opts, struct sbx_err *err)
{
    struct stream_ud su = {.opts = opts};
    struct sse_parser sse;
    sse_init(&sse, sse_event, &su);
    struct xfer x = {
        .out_fd = -1, .in_fd = -1, .sse = &sse, .on_tick = opts->on_tick, .ud = opts->ud};
    int r = perform_json(c, method, path, body, "Accept: text/event-stream", &x, err);
    if (r == 0 && !x.to_sink && !su.stopped)
        r = sbx_err_set(err, EBADMSG, "bad_answer", "the server did not answer with a stream");
    sse_release(&sse);
    xfer_release(&x);
    return r;
}

int sbx_upload_fd(struct sbx_client *c, const char *path, int fd, long long size,
                  sbx_tick_fn on_tick, void *ud, json_t **out, struct sbx_err *err)
{
    if (out)
        *out = NULL;
    struct xfer x = {.out_fd = -1,
                     .in_fd = fd,
                     .in_size = size,
                     .body_max = SBX_JSON_BODY_MAX,
                     .on_tick = on_tick,
                     .ud = ud};
    _cleanup_free_ char *url = full_url(c, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    int r = perform(c, "PUT", url, true, h, NULL, &x, err);
    if (r == 0 && out && x.body_len)
        *out = json_loadb(x.body, x.body_len, 0, NULL);
    xfer_release(&x);
    return r;
}

int sbx_download_fd(struct sbx_client *c, const char *path_or_url, int fd, sbx_tick_fn on_tick,
                    void *ud, char *sha256_hex, struct sbx_err *err)
{
    bool absolute = !strncmp(path_or_url, "http://", 7) || !strncmp(path_or_url, "https://", 8);
    struct xfer x = {.out_fd = fd, .in_fd = -1, .on_tick = on_tick, .ud = ud};
    if (sha256_hex) {
        x.md = EVP_MD_CTX_new();
        if (!x.md || EVP_DigestInit_ex(x.md, EVP_sha256(), NULL) != 1) {
            xfer_release(&x);
            return sbx_err_set(err, ENOMEM, "local_error", "SHA-256 is not available");
        }
    }
    _cleanup_free_ char *url = absolute ? sbx_xstrdup(path_or_url) : full_url(c, path_or_url);
    int r = perform(c, "GET", url, !absolute, NULL, NULL, &x, err);
    if (r == 0 && sha256_hex) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(x.md, md, &n);
        sbx_hex(md, n, sha256_hex);
    }
    xfer_release(&x);
    return r;
}
