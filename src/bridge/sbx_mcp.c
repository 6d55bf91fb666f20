/* sbx-mcp: MCP over stdio for desktop clients, bridged to sbxd's /mcp (docs/mcp.md).
 *
 * Each newline-delimited JSON-RPC message on stdin is POSTed to SBX_URL (default
 * http://127.0.0.1:8787/mcp) with the key from SBX_API_KEY, the session id and the
 * negotiated protocol version; each message of the answer (one JSON object, or every
 * event of an SSE stream) is written to stdout as one line. Transfers run side by side
 * (curl multi), so a long tools/call does not hold back a ping or a cancellation. An HTTP
 * failure of a request becomes a JSON-RPC error for its id, so the client never hangs.
 * At the end of stdin the session is deleted. Logs go to stderr only. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define LINE_MAX_BYTES (16u * 1024u * 1024u) /* one message from the client */
#define ANSWER_MAX_BYTES (64u * 1024u * 1024u)
#define SESSION_MAX 128
#define VERSION_MAX 32

struct buf {
    char *p;
    size_t len;
};

static void buf_add(struct buf *b, const char *p, size_t n)
{
    char *q = realloc(b->p, b->len + n + 1);
    if (!q) {
        fprintf(stderr, "sbx-mcp: out of memory\n");
        exit(1);
    }
    b->p = q;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
}

struct xfer {
    CURL *h;
    struct curl_slist *headers;
    char *body;
    json_t *id; /* the request's, or NULL for a notification */
    bool initialize;
    bool sse;
    struct buf in;    /* the JSON answer, or the SSE bytes not yet split into lines */
    struct buf event; /* the data: lines of the current SSE event */
    bool too_big;
};

static char session[SESSION_MAX + 1];
static char version[VERSION_MAX + 1];
static const char *url, *key;

/* One message to stdout, compact, on one line (a raw newline would split it). */
static void put_message(json_t *m)
{
    char *s = json_dumps(m, JSON_COMPACT);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
}

static void emit(const char *text, size_t len)
{
    json_t *m = json_loadb(text, len, 0, NULL);
    if (!m) {
        fprintf(stderr, "sbx-mcp: dropped a message that is not JSON\n");
        return;
    }
    put_message(m);
    json_decref(m);
}

static void emit_error(json_t *id, const char *msg)
{
    if (!id)
        return;
    json_t *e = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          -32603, "message", msg);
    put_message(e);
    json_decref(e);
}

/* The initialize result names the version every later request carries. */
static void note_version(const char *text, size_t len)
{
    json_t *m = json_loadb(text, len, 0, NULL);
    const char *v =
        json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion"));
    if (v && strlen(v) <= VERSION_MAX)
        snprintf(version, sizeof(version), "%s", v);
    json_decref(m);
}

static void sse_line(struct xfer *x, const char *line, size_t n)
{
    if (n && line[n - 1] == '\r')
        n--;
    if (n == 0) { /* the end of an event */
        if (x->event.len) {
            if (x->initialize)
                note_version(x->event.p, x->event.len);
            emit(x->event.p, x->event.len);
        }
        x->event.len = 0;
        return;
    }
    if (n >= 5 && !memcmp(line, "data:", 5)) {
        size_t skip = n > 5 && line[5] == ' ' ? 6 : 5;
        if (x->event.len)
            buf_add(&x->event, "\n", 1);
        buf_add(&x->event, line + skip, n - skip);
    }
    /* event:, id:, retry: and comments carry nothing the client needs here */
}

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
    struct xfer *x = data;
    size_t len = size * n;
    if (x->in.len + len > ANSWER_MAX_BYTES) {
        x->too_big = true;
        return 0;
    }
    buf_add(&x->in, p, len);
    if (!x->sse)
        return len;
    size_t start = 0;
    for (size_t i = 0; i < x->in.len; i++) {
        if (x->in.p[i] == '\n') {
            sse_line(x, x->in.p + start, i - start);
            start = i + 1;
        }
    }
    memmove(x->in.p, x->in.p + start, x->in.len - start);
    x->in.len -= start;
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *data)
{
    struct xfer *x = data;
    size_t len = size * n;
    static const char sid[] = "mcp-session-id:", ctype[] = "content-type:";
    if (len > sizeof(sid) && !strncasecmp(p, sid, sizeof(sid) - 1)) {
        const char *v = p + sizeof(sid) - 1;
        size_t vl = len - (sizeof(sid) - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl && vl <= SESSION_MAX) {
            memcpy(session, v, vl);
            session[vl] = 0;
        }
    } else if (len > sizeof(ctype) && !strncasecmp(p, ctype, sizeof(ctype) - 1)) {
        x->sse = strstr(p, "text/event-stream") != NULL;
    }
    return len;
}

static struct curl_slist *common_headers(void)
{
    struct curl_slist *h = NULL;
    char line[512];
    snprintf(line, sizeof(line), "Authorization: Bearer %s", key);
    h = curl_slist_append(h, line);
    if (session[0]) {
        snprintf(line, sizeof(line), "Mcp-Session-Id: %s", session);
        h = curl_slist_append(h, line);
    }
    if (version[0]) {
        snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", version);
        h = curl_slist_append(h, line);
    }
    return h;
}

static void xfer_free(struct xfer *x)
{
    curl_easy_cleanup(x->h);
    curl_slist_free_all(x->headers);
    free(x->body);
    free(x->in.p);
    free(x->event.p);
    json_decref(x->id);
    free(x);
}

static void start(CURLM *multi, const char *line, size_t len)
{
    json_t *m = json_loadb(line, len, 0, NULL);
    if (!json_is_object(m)) {
        fprintf(stderr, "sbx-mcp: ignored a line that is not a JSON-RPC message\n");
        json_decref(m);
        return;
    }
    struct xfer *x = calloc(1, sizeof(*x));
    if (!x)
        exit(1);
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    if (id && method)
        x->id = json_incref(id);
    x->initialize = method && !strcmp(method, "initialize");
    if (x->initialize) /* a new session starts from nothing */
        session[0] = version[0] = 0;
    json_decref(m);
    x->body = strndup(line, len);
    x->h = curl_easy_init();
    x->headers = common_headers();
    x->headers = curl_slist_append(x->headers, "Content-Type: application/json");
    x->headers = curl_slist_append(x->headers, "Accept: application/json, text/event-stream");
    if (!x->h || !x->body)
        exit(1);
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_multi_add_handle(multi, x->h);
}

static void finished(CURLM *multi, CURL *h, CURLcode res)
{
    struct xfer *x;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&x);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(multi, h);
    char msg[512];
    if (res != CURLE_OK) {
        snprintf(msg, sizeof(msg), "sbx-mcp: %s: %s", url,
                 x->too_big ? "the answer is too large" : curl_easy_strerror(res));
        emit_error(x->id, msg);
    } else if (status >= 300) {
        snprintf(msg, sizeof(msg), "upstream HTTP %ld: %.400s", status, x->in.p ? x->in.p : "");
        emit_error(x->id, msg);
        if (status == 404)
            session[0] = 0; /* the session is gone: the client must initialize again */
    } else if (x->sse) {
        if (x->in.len)
            sse_line(x, x->in.p, x->in.len);
        sse_line(x, "", 0);
    } else if (x->in.len) {
        if (x->initialize)
            note_version(x->in.p, x->in.len);
        emit(x->in.p, x->in.len);
    }
    xfer_free(x);
}

static void end_session(void)
{
    if (!session[0])
        return;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = common_headers();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    (void)curl_easy_perform(h);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
}

int main(int argc, char **argv)
{
    url = getenv("SBX_URL");
    key = getenv("SBX_API_KEY");
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fprintf(stderr, "usage: SBX_API_KEY=sbx_... [SBX_URL=http://127.0.0.1:8787/mcp] %s\n",
                argv[0]);
        return 0;
    }
    if (!url || !*url)
        url = "http://127.0.0.1:8787/mcp";
    if (!key || !*key || strlen(key) > 256) {
        fprintf(stderr, "sbx-mcp: set SBX_API_KEY to an sbx key\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return 1;
    CURLM *multi = curl_multi_init();
    int fl = fcntl(0, F_GETFL);
    if (fl >= 0)
        (void)fcntl(0, F_SETFL, fl | O_NONBLOCK);
    struct buf line = {0};
    bool eof = false;
    int running = 0;
    for (;;) {
        struct curl_waitfd in = {.fd = 0, .events = CURL_WAIT_POLLIN};
        curl_multi_wait(multi, eof ? NULL : &in, eof ? 0 : 1, 1000, NULL);
        if (!eof) {
            char chunk[65536];
            ssize_t n = read(0, chunk, sizeof(chunk));
            if (n == 0) {
                eof = true;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                eof = true;
            } else if (n > 0) {
                buf_add(&line, chunk, (size_t)n);
                size_t startl = 0;
                for (size_t i = 0; i < line.len; i++) {
                    if (line.p[i] != '\n')
                        continue;
                    size_t l = i - startl;
                    if (l && line.p[startl + l - 1] == '\r')
                        l--;
                    if (l)
                        start(multi, line.p + startl, l);
                    startl = i + 1;
                }
                memmove(line.p, line.p + startl, line.len - startl);
                line.len -= startl;
                if (line.len > LINE_MAX_BYTES) {
                    fprintf(stderr, "sbx-mcp: a message longer than %u bytes was dropped\n",
                            LINE_MAX_BYTES);
                    line.len = 0;
                }
            }
        }
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)))
            if (msg->msg == CURLMSG_DONE)
                finished(multi, msg->easy_handle, msg->data.result);
        if (eof && running == 0)
            break;
    }
    end_session();
    free(line.p);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return 0;
}
