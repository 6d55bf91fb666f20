#include "llm.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>

#include "../../common/util.h"

struct llm {
    struct loop *loop;
    CURLM *multi;
    struct loop_timer *timer;
    char *url; /* …/chat/completions, or NULL: only the Anthropic endpoint is set */
    char *auth_header;
    char *model;
    char *anthropic_url; /* …/messages (chat gateway only), or NULL */
    char *anthropic_key_header;
};

struct llm_call {
    struct llm *m;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    size_t len;
    bool too_big;
    llm_done_fn cb;
    const struct llm_raw_ops *raw; /* llm_post's, instead of cb */
    void *data;
};

/* ---- the multi handle in our loop ---- */

static void check_done(struct llm *m);

static void on_socket_event(struct loop *l, int fd, uint32_t events, void *data)
{
    struct llm *m = data;
    int flags = 0, running;
    if (events & EPOLLIN)
        flags |= CURL_CSELECT_IN;
    if (events & EPOLLOUT)
        flags |= CURL_CSELECT_OUT;
    if (events & (EPOLLERR | EPOLLHUP))
        flags |= CURL_CSELECT_ERR;
    (void)curl_multi_socket_action(m->multi, fd, flags, &running);
    check_done(m);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct llm *m = userp;
    struct loop_watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        loop_watch_del(m->loop, w);
        curl_multi_assign(m->multi, s, NULL);
        return 0;
    }
    uint32_t ev = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (w)
        return loop_watch_mod(m->loop, w, ev) < 0 ? -1 : 0;
    if (loop_watch_add(m->loop, s, ev, on_socket_event, m, &w) < 0)
        return -1;
    curl_multi_assign(m->multi, s, w);
    return 0;
}

static void on_timer(struct loop *l, void *data)
{
    struct llm *m = data;
    int running;
    m->timer = NULL;
    (void)curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(m);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct llm *m = userp;
    if (m->timer)
        loop_timer_cancel(m->loop, m->timer);
    m->timer = timeout_ms < 0 ? NULL : loop_timer_add(m->loop, timeout_ms, on_timer, m);
    return 0;
}

static char *endpoint(const char *base_url, const char *suffix)
{
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    return sbx_xasprintf("%.*s/%s", (int)n, base_url, suffix);
}

int llm_new(struct loop *l, const char *base_url, const char *api_key, const char *model,
            struct llm **out, struct sbx_err *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return sbx_err_set(err, EIO, "internal", "libcurl did not initialise");
    struct llm *m = sbx_xcalloc(1, sizeof(*m));
    m->loop = l;
    m->multi = curl_multi_init();
    if (!m->multi) {
        free(m);
        curl_global_cleanup();
        return sbx_err_set(err, ENOMEM, "internal", "curl_multi_init failed");
    }
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
    m->url = base_url ? endpoint(base_url, "chat/completions") : NULL;
    m->auth_header = api_key ? sbx_xasprintf("Authorization: Bearer %s", api_key) : NULL;
    m->model = sbx_xstrdup(model);
    *out = m;
    return 0;
}

void llm_set_anthropic(struct llm *m, const char *base_url, const char *api_key)
{
    m->anthropic_url = endpoint(base_url, "messages");
    m->anthropic_key_header = api_key ? sbx_xasprintf("x-api-key: %s", api_key) : NULL;
}

bool llm_has_api(const struct llm *m, enum llm_api api)
{
    return m && (api == LLM_API_OPENAI ? m->url : m->anthropic_url) != NULL;
}

const char *llm_default_model(const struct llm *m)
{
    return m->model;
}

static void free_secret(char *s)
{
    if (s)
        memset(s, 0, strlen(s));
    free(s);
}

static void call_free(struct llm_call *c)
{
    curl_multi_remove_handle(c->m->multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->headers);
    free(c->body);
    free(c);
}

void llm_free(struct llm *m)
{
    if (!m)
        return;
    /* Calls still running belong to kernel runs, which cancel them before this. */
    if (m->timer)
        loop_timer_cancel(m->loop, m->timer);
    curl_multi_cleanup(m->multi);
    free_secret(m->auth_header);
    free_secret(m->anthropic_key_header);
    free(m->anthropic_url);
    free(m->url);
    free(m->model);
    free(m);
    curl_global_cleanup();
}

/* ---- one call ---- */

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct llm_call *c = userdata;
    size_t n = size * nmemb;
    if (c->raw && c->raw->on_data) {
        long status = 0;
        const char *ctype = NULL;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c->easy, CURLINFO_CONTENT_TYPE, &ctype);
        return c->raw->on_data(status, ctype, ptr, n, c->data) < 0 ? 0 : n;
    }
    if (c->len + n > LLM_RESPONSE_MAX) {
        c->too_big = true;
        return 0; /* makes libcurl fail the transfer */
    }
    c->body = sbx_xrealloc(c->body, c->len + n + 1);
    memcpy(c->body + c->len, ptr, n);
    c->len += n;
    c->body[c->len] = '\0';
    return n;
}

/* The answer's text, or an error that says what the endpoint did. */
static void finish(struct llm_call *c, CURLcode res)
{
    struct sbx_err e = {0};
    const char *text = NULL;
    json_t *doc = NULL;
    long status = 0;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    if (c->too_big) {
        sbx_err_set(&e, EMSGSIZE, "llm_error", "the model endpoint's answer is over %u bytes",
                    LLM_RESPONSE_MAX);
    } else if (res != CURLE_OK) {
        sbx_err_set(&e, EIO, "llm_error", "calling the model endpoint failed: %s",
                    curl_easy_strerror(res));
    } else if (status != 200) {
        sbx_err_set(&e, EIO, "llm_error", "the model endpoint answered HTTP %ld: %.200s", status,
                    c->body ? c->body : "");
    } else {
        doc = json_loadb(c->body ? c->body : "", c->len, 0, NULL);
        json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
        text = json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
        if (!text)
            sbx_err_set(&e, EPROTO, "llm_error",
                        "the model endpoint's answer has no choices[0].message.content");
    }
    llm_done_fn cb = c->cb;
    void *data = c->data;
    cb(text, text ? NULL : &e, data);
    json_decref(doc);
    call_free(c);
}

static void finish_raw(struct llm_call *c, CURLcode res)
{
    struct sbx_err e = {0};
    long status = 0;
    const char *ctype = NULL;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c->easy, CURLINFO_CONTENT_TYPE, &ctype);
    if (c->too_big)
        sbx_err_set(&e, EMSGSIZE, "upstream_error", "the model endpoint's answer is over %u bytes",
                    LLM_RESPONSE_MAX);
    else if (res != CURLE_OK)
        sbx_err_set(&e, EIO, "upstream_error", "calling the model endpoint failed: %s",
                    curl_easy_strerror(res));
    c->raw->on_done(status, ctype, c->body, c->len, e.code[0] ? &e : NULL, c->data);
    call_free(c);
}

static void check_done(struct llm *m)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct llm_call *c = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        if (c->raw)
            finish_raw(c, msg->data.result);
        else
            finish(c, msg->data.result);
    }
}

static int build_body(struct llm *m, json_t *req, char **out, struct sbx_err *err)
{
    json_t *prompt = json_object_get(req, "prompt");
    json_t *system = json_object_get(req, "system");
    json_t *model = json_object_get(req, "model");
    json_t *max_tokens = json_object_get(req, "max_tokens");
    json_t *temperature = json_object_get(req, "temperature");
    if (!json_is_string(prompt) || json_string_length(prompt) > LLM_PROMPT_MAX)
        return sbx_err_set(err, EINVAL, "llm_error", "prompt must be a string of at most %u bytes",
                           LLM_PROMPT_MAX);
    if ((system && !json_is_string(system)) || (model && !json_is_string(model)) ||
        (max_tokens && (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1)) ||
        (temperature && !json_is_number(temperature)))
        return sbx_err_set(err, EINVAL, "llm_error",
                           "system and model must be strings, max_tokens a positive integer, "
                           "temperature a number");
    json_t *messages = json_array();
    if (system)
        json_array_append_new(messages,
                              json_pack("{s:s,s:O}", "role", "system", "content", system));
    json_array_append_new(messages, json_pack("{s:s,s:O}", "role", "user", "content", prompt));
    json_t *body = json_pack("{s:s,s:o}", "model", model ? json_string_value(model) : m->model,
                             "messages", messages);
    if (max_tokens)
        json_object_set(body, "max_tokens", max_tokens);
    if (temperature)
        json_object_set(body, "temperature", temperature);
    *out = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return *out ? 0 : sbx_err_set(err, ENOMEM, "internal", "encoding the llm request");
}

/* Start c's POST of body to url with c->headers; c is freed on failure. */
static int start(struct llm *m, struct llm_call *c, const char *url, const char *body, size_t len,
                 struct sbx_err *err)
{
    c->m = m;
    c->easy = curl_easy_init();
    if (!c->easy) {
        curl_slist_free_all(c->headers);
        free(c);
        return sbx_err_set(err, ENOMEM, "internal", "curl_easy_init failed");
    }
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)LLM_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    if (curl_multi_add_handle(m->multi, e) != CURLM_OK) {
        call_free(c);
        return sbx_err_set(err, EIO, "internal", "curl_multi_add_handle failed");
    }
    return 0;
}

int llm_query(struct llm *m, json_t *req, llm_done_fn cb, void *data, struct llm_call **out,
              struct sbx_err *err)
{
    if (!m->url)
        return sbx_err_set(err, ENOTSUP, "llm_error",
                           "llm_query is not configured: the operator has not set SBX_LLM_URL "
                           "for sbxd");
    _cleanup_free_ char *body = NULL;
    int r = build_body(m, req, &body, err);
    if (r < 0)
        return r;
    struct llm_call *c = sbx_xcalloc(1, sizeof(*c));
    c->cb = cb;
    c->data = data;
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (m->auth_header)
        c->headers = curl_slist_append(c->headers, m->auth_header);
    if ((r = start(m, c, m->url, body, strlen(body), err)) < 0)
        return r;
    *out = c;
    return 0;
}

int llm_post(struct llm *m, enum llm_api api, const char *body, size_t len,
             const char *const *headers, const struct llm_raw_ops *ops, void *data,
             struct llm_call **out, struct sbx_err *err)
{
    if (!llm_has_api(m, api))
        return sbx_err_set(err, ENOTSUP, "chat_unavailable",
                           "the operator has not configured %s for sbxd",
                           api == LLM_API_OPENAI ? "SBX_LLM_URL" : "SBX_LLM_ANTHROPIC_URL");
    struct llm_call *c = sbx_xcalloc(1, sizeof(*c));
    c->raw = ops;
    c->data = data;
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    const char *auth = api == LLM_API_OPENAI ? m->auth_header : m->anthropic_key_header;
    if (auth)
        c->headers = curl_slist_append(c->headers, auth);
    for (size_t i = 0; headers && headers[i]; i++)
        c->headers = curl_slist_append(c->headers, headers[i]);
    int r = start(m, c, api == LLM_API_OPENAI ? m->url : m->anthropic_url, body, len, err);
    if (r < 0)
        return r;
    *out = c;
    return 0;
}

void llm_cancel(struct llm_call *c)
{
    if (c)
        call_free(c);
}
