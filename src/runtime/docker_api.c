/* The Docker Engine API with libcurl, over its unix socket or TCP and TLS (docker_api.h). */
#include "docker_api.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "curlx.h"

#define DOCKER_HEAD_MAX 8192 /* a hijack answer's status line and headers */

bool docker_host_remote(const char *host)
{
    return host && !strncmp(host, DOCKER_TCP_PREFIX, strlen(DOCKER_TCP_PREFIX));
}

/* Point c at the engine: its socket, or its TCP address with our client certificate and
 * its CA (the engine's certificate is checked against it, host name included). Returns
 * the URL of path (below DOCKER_API_PREFIX; "" for the root). */
static char *engine_opts(CURL *c, const struct docker_engine *e, const char *path)
{
    if (!docker_host_remote(e->host)) {
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->host);
        return sbx_xasprintf("http://docker%s%s", *path ? DOCKER_API_PREFIX : "/", path);
    }
    const char *addr = e->host + strlen(DOCKER_TCP_PREFIX);
    if (!e->tls_dir || !*e->tls_dir)
        return sbx_xasprintf("http://%s%s%s", addr, *path ? DOCKER_API_PREFIX : "/", path);
    _cleanup_free_ char *ca = sbx_xasprintf("%s/" DOCKER_TLS_CA, e->tls_dir);
    _cleanup_free_ char *cert = sbx_xasprintf("%s/" DOCKER_TLS_CERT, e->tls_dir);
    _cleanup_free_ char *key = sbx_xasprintf("%s/" DOCKER_TLS_KEY, e->tls_dir);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca); /* libcurl copies option strings */
    curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
    curl_easy_setopt(c, CURLOPT_SSLKEY, key);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    return sbx_xasprintf("https://%s%s%s", addr, *path ? DOCKER_API_PREFIX : "/", path);
}

/* A TLS session that failed: a certificate refused, by us or by the engine (with TLS 1.3
 * the engine's refusal of ours comes as an alert at the first read: libcurl's detail
 * names the TLS library then). */
static bool tls_failure(CURLcode rc, const char *detail)
{
    return rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
           rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE ||
           rc == CURLE_SSL_ISSUER_ERROR || rc == CURLE_SSL_CIPHER ||
           ((rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) && strstr(detail, "SSL"));
}

/* detail: libcurl's CURLOPT_ERRORBUFFER, "" when it said nothing more. */
static int transport_error(const struct docker_engine *e, CURLcode rc, const char *detail,
                           const char *method, const char *path, struct sbx_err *err)
{
    const char *what = curl_easy_strerror(rc);
    if (docker_host_remote(e->host) && e->tls_dir && tls_failure(rc, detail))
        return sbx_err_set(err, EPROTO, "docker_tls_error",
                           "docker engine at %s: TLS with the certificates in %s failed: %s%s%s%s",
                           e->host, e->tls_dir, what, *detail ? " (" : "", detail,
                           *detail ? ")" : "");
    return sbx_err_set(err, rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
                       "docker_unreachable", "docker engine at %s: %s %s: %s%s%s%s", e->host,
                       method, path, what, *detail ? " (" : "", detail, *detail ? ")" : "");
}

static int request(const struct docker_engine *e, long timeout_ms, const char *method,
                   const char *path, const char *body, int upload_fd, long *status, char **resp,
                   struct sbx_err *err)
{
    *status = 0;
    if (resp)
        *resp = NULL;
    _cleanup_curl_ CURL *c = curl_easy_init();
    if (!c)
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    _cleanup_free_ char *url = engine_opts(c, e, path);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    _cleanup_slist_ struct curl_slist *hdrs = NULL;
    struct curlx_body b = {.max = DOCKER_RESP_MAX};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curlx_body_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (timeout_ms > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (upload_fd >= 0) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/x-tar");
        hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L); /* the method is CUSTOMREQUEST's */
        curl_easy_setopt(c, CURLOPT_READFUNCTION, curlx_fd_read_cb);
        curl_easy_setopt(c, CURLOPT_READDATA, &upload_fd);
    } else if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        free(b.data);
        return transport_error(e, rc, detail, method, path, err);
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (resp)
        *resp = b.data ? b.data : sbx_xstrdup("");
    else
        free(b.data);
    return 0;
}

int docker_call(const struct docker_engine *e, long timeout_ms, const char *method,
                const char *path, const char *body, long *status, char **resp,
                struct sbx_err *err)
{
    return request(e, timeout_ms, method, path, body, -1, status, resp, err);
}

int docker_upload(const struct docker_engine *e, long timeout_ms, const char *method,
                  const char *path, int fd, long *status, char **resp, struct sbx_err *err)
{
    return request(e, timeout_ms, method, path, NULL, fd, status, resp, err);
}

const char *docker_message(char *resp)
{
    if (!resp)
        return "";
    json_t *j = json_loads(resp, 0, NULL);
    const char *m = json_string_value(json_object_get(j, "message"));
    if (m)
        memmove(resp, m, strlen(m) + 1); /* never longer than the document holding it */
    json_decref(j);
    resp[strcspn(resp, "\r\n")] = '\0';
    return resp;
}

struct docker_stream {
    CURL *c;
    int fd;
    char *pending; /* stream bytes read together with the answer's head */
    size_t pending_len, pending_off;
};

static int wait_fd(int fd, short ev, long timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, (int)timeout_ms);
    return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

int docker_hijack(const struct docker_engine *e, long timeout_ms, const char *path,
                  struct docker_stream **out, struct sbx_err *err)
{
    *out = NULL;
    struct docker_stream *s = sbx_xcalloc(1, sizeof(*s));
    s->c = curl_easy_init();
    if (!s->c) {
        free(s);
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    }
    /* Over TLS, curl_easy_send/recv carry the stream through the session the connect
     * set up; the relay drains each readable wake-up until -EAGAIN, so bytes the TLS
     * layer holds decrypted are never left waiting for the socket to wake again. */
    _cleanup_free_ char *url = engine_opts(s->c, e, "");
    curl_easy_setopt(s->c, CURLOPT_URL, url);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(s->c, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(s->c, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(s->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(s->c);
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        rc = curl_easy_getinfo(s->c, CURLINFO_ACTIVESOCKET, &sock);
    if (rc != CURLE_OK || sock == CURL_SOCKET_BAD) {
        int r = transport_error(e, rc, detail, "POST", path, err);
        docker_stream_free(s);
        return r;
    }
    curl_easy_setopt(s->c, CURLOPT_ERRORBUFFER, NULL); /* detail is this frame's */
    s->fd = (int)sock;
    _cleanup_free_ char *req = sbx_xasprintf(
        "POST " DOCKER_API_PREFIX "%s HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n"
        "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
        path);
    size_t off = 0, len = strlen(req);
    while (off < len) {
        size_t n = 0;
        rc = curl_easy_send(s->c, req + off, len - off, &n);
        if (rc == CURLE_AGAIN && wait_fd(s->fd, POLLOUT, timeout_ms) == 0)
            continue;
        if (rc != CURLE_OK) {
            docker_stream_free(s);
            return sbx_err_set(err, EIO, "docker_unreachable", "attach request: %s",
                               curl_easy_strerror(rc));
        }
        off += n;
    }
    char head[DOCKER_HEAD_MAX + 1];
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got == DOCKER_HEAD_MAX) {
            docker_stream_free(s);
            return sbx_err_set(err, EPROTO, "internal", "attach answer head too long");
        }
        size_t n = 0;
        rc = curl_easy_recv(s->c, head + got, DOCKER_HEAD_MAX - got, &n);
        if (rc == CURLE_AGAIN) {
            int r = wait_fd(s->fd, POLLIN, timeout_ms);
            if (r < 0) {
                docker_stream_free(s);
                return sbx_err_sys(err, -r, "waiting for the attach answer");
            }
            continue;
        }
        if (rc != CURLE_OK || n == 0) {
            docker_stream_free(s);
            return sbx_err_set(err, EIO, "internal", "attach answer: %s",
                               rc ? curl_easy_strerror(rc) : "connection closed");
        }
        got += n;
        head[got] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    int code = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &code) != 1 || (code != 101 && code != 200)) {
        int r = sbx_err_set(err, EIO, "internal", "attach: HTTP %d %s", code,
                            docker_message(end + 4));
        docker_stream_free(s);
        return r;
    }
    size_t rest = got - (size_t)(end + 4 - head);
    if (rest) {
        s->pending = sbx_xmalloc(rest);
        memcpy(s->pending, end + 4, rest);
        s->pending_len = rest;
    }
    *out = s;
    return 0;
}

int docker_stream_fd(const struct docker_stream *s)
{
    return s->fd;
}

long docker_stream_recv(struct docker_stream *s, void *buf, size_t len)
{
    if (s->pending_off < s->pending_len) {
        size_t n = s->pending_len - s->pending_off;
        n = n < len ? n : len;
        memcpy(buf, s->pending + s->pending_off, n);
        s->pending_off += n;
        return (long)n;
    }
    size_t n = 0;
    CURLcode rc = curl_easy_recv(s->c, buf, len, &n);
    if (rc == CURLE_AGAIN)
        return -EAGAIN;
    if (rc != CURLE_OK)
        return -EIO;
    return (long)n;
}

long docker_stream_send(struct docker_stream *s, const void *buf, size_t len)
{
    size_t n = 0;
    CURLcode rc = curl_easy_send(s->c, buf, len, &n);
    if (rc == CURLE_AGAIN)
        return -EAGAIN;
    if (rc != CURLE_OK)
        return -EIO;
    return (long)n;
}

void docker_stream_free(struct docker_stream *s)
{
    if (!s)
        return;
    if (s->c)
        curl_easy_cleanup(s->c);
    free(s->pending);
    free(s);
}
