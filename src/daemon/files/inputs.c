#include "inputs.h"

#include <errno.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "fetch.h"
#include "workspace.h"

struct input {
    const char *path; /* borrowed from the request body */
    const char *url;  /* borrowed; data is NULL until it is fetched */
    unsigned char *data;
    size_t len;
};

struct inputs {
    struct input v[INPUTS_MAX];
    size_t n;
    /* While fetching the url inputs, one after the other, within one budget of bytes and time. */
    struct fetch *fetch;
    size_t next;
    struct egress_proxy *px;
    struct jobs *jobs;
    const char *ca_file;
    size_t bytes_left;
    long long timeout_ms, deadline_ms;
    inputs_note_fn note;
    inputs_fetched_fn cb;
    void *arg;
};

void inputs_free(struct inputs *in)
{
    if (!in)
        return;
    fetch_cancel(in->fetch);
    for (size_t i = 0; i < in->n; i++)
        free(in->v[i].data);
    free(in);
}

bool inputs_need_fetch(const struct inputs *in)
{
    for (size_t i = 0; in && i < in->n; i++)
        if (in->v[i].url && !in->v[i].data)
            return true;
    return false;
}

static void fetch_next(struct inputs *in);

static void on_fetched(unsigned char *data, size_t len, const struct fetch_info *info,
                       const struct sbx_err *err, void *arg)
{
    struct inputs *in = arg;
    in->fetch = NULL;
    struct input *one = &in->v[in->next];
    in->note(&(struct inputs_fetch_note){.index = in->next,
                                         .path = one->path,
                                         .url = one->url,
                                         .host = info->host,
                                         .addr = info->addr,
                                         .bytes = len,
                                         .ms = info->ms,
                                         .err = err},
             in->arg);
    if (err) {
        struct sbx_err e = *err;
        sbx_err_wrap(&e, "inputs[%zu].url", in->next);
        in->cb(&e, in->arg);
        return;
    }
    one->data = data ? data : sbx_xmalloc(1);
    one->len = len;
    in->bytes_left -= len;
    in->next++;
    fetch_next(in);
}

static void fetch_next(struct inputs *in)
{
    while (in->next < in->n && !in->v[in->next].url)
        in->next++;
    if (in->next == in->n) {
        in->cb(NULL, in->arg);
        return;
    }
    struct sbx_err err = {0};
    long long left_ms = in->deadline_ms - sbx_now_ms();
    if (left_ms <= 0) {
        sbx_err_set(&err, ETIMEDOUT, "input_fetch_failed",
                    "inputs[%zu].url: the url inputs took longer than %lld ms in all", in->next,
                    in->timeout_ms);
        in->cb(&err, in->arg);
        return;
    }
    if (in->bytes_left == 0) {
        sbx_err_set(&err, EFBIG, "input_too_large",
                    "inputs[%zu].url: the url inputs before it used up their bytes", in->next);
        in->cb(&err, in->arg);
        return;
    }
    in->fetch = fetch_start(in->px, in->jobs, in->v[in->next].url, in->ca_file, in->bytes_left,
                            left_ms, on_fetched, in, &err);
    if (!in->fetch) {
        in->note(&(struct inputs_fetch_note){.index = in->next,
                                             .path = in->v[in->next].path,
                                             .url = in->v[in->next].url,
                                             .host = "",
                                             .addr = "",
                                             .err = &err},
                 in->arg);
        sbx_err_wrap(&err, "inputs[%zu].url", in->next);
        in->cb(&err, in->arg);
    }
}

void inputs_fetch(struct inputs *in, struct egress_proxy *px, struct jobs *jobs,
                  const char *ca_file, const struct inputs_limits *lim, inputs_note_fn note,
                  inputs_fetched_fn cb, void *arg)
{
    in->px = px;
    in->jobs = jobs;
    in->ca_file = ca_file;
    in->bytes_left = lim->max_bytes;
    in->timeout_ms = lim->timeout_ms;
    in->deadline_ms = sbx_now_ms() + lim->timeout_ms;
    in->note = note;
    in->cb = cb;
    in->arg = arg;
    in->next = 0;
    fetch_next(in);
}

static int decode_base64(const char *s, size_t len, unsigned char **out, size_t *out_len)
{
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    if (!ctx)
        abort();
    unsigned char *buf = sbx_xmalloc(len / 4 * 3 + 4);
    int n = 0, m = 0;
    EVP_DecodeInit(ctx);
    int ok = EVP_DecodeUpdate(ctx, buf, &n, (const unsigned char *)s, (int)len) >= 0 &&
             EVP_DecodeFinal(ctx, buf + n, &m) == 1;
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return -EINVAL;
    }
    *out = buf;
    *out_len = (size_t)(n + m);
    return 0;
}

static int parse_one(json_t *item, size_t i, struct input *out, struct sbx_err *err)
{
    if (!json_is_object(item))
        return sbx_err_set(err, EINVAL, "invalid_input", "inputs[%zu] must be an object", i);
    json_t *path = json_object_get(item, "path");
    json_t *content = json_object_get(item, "content");
    json_t *b64 = json_object_get(item, "content_base64");
    json_t *url = json_object_get(item, "url");
    if (!json_is_string(path) || memchr(json_string_value(path), '\0', json_string_length(path)))
        return sbx_err_set(err, EINVAL, "invalid_input", "inputs[%zu].path must be a string", i);
    int r = ws_path_check(json_string_value(path), false, err);
    if (r < 0)
        return sbx_err_wrap(err, "inputs[%zu].path", i);
    if (!!content + !!b64 + !!url != 1)
        return sbx_err_set(err, EINVAL, "invalid_input",
                           "inputs[%zu] needs exactly one of content, content_base64, url", i);
    json_t *src = content ? content : b64 ? b64 : url;
    if (!json_is_string(src))
        return sbx_err_set(err, EINVAL, "invalid_input", "inputs[%zu]: the source must be a string",
                           i);
    out->path = json_string_value(path);
    if (url) {
        /* Whether the URL may be fetched is egress_proxy_check_url's call, at fetch time. */
        if (strncmp(json_string_value(url), "https://", 8))
            return sbx_err_set(err, EINVAL, "invalid_input", "inputs[%zu].url must be https://",
                               i);
        out->url = json_string_value(url);
        return 0;
    }
    if (content) {
        out->len = json_string_length(content);
        out->data = sbx_xmalloc(out->len + 1);
        memcpy(out->data, json_string_value(content), out->len);
        return 0;
    }
    if (decode_base64(json_string_value(b64), json_string_length(b64), &out->data, &out->len) < 0)
        return sbx_err_set(err, EINVAL, "invalid_input",
                           "inputs[%zu].content_base64 is not valid base64", i);
    return 0;
}

int inputs_parse(json_t *body, struct inputs **out, struct sbx_err *err)
{
    *out = NULL;
    json_t *arr = json_object_get(body, "inputs");
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > INPUTS_MAX)
        return sbx_err_set(err, EINVAL, "invalid_input",
                           "inputs must be an array of at most %d objects", INPUTS_MAX);
    struct inputs *in = sbx_xcalloc(1, sizeof(*in));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        int r = parse_one(json_array_get(arr, i), i, &in->v[i], err);
        in->n = i + 1; /* so that inputs_free releases what parse_one allocated */
        if (r < 0) {
            inputs_free(in);
            return r;
        }
    }
    *out = in;
    return 0;
}

int inputs_write(const struct inputs *in, const char *workspace_dir, struct sbx_err *err)
{
    if (!in)
        return 0;
    _cleanup_close_ int root = -1;
    int r = ws_open_root(workspace_dir, &root, err);
    for (size_t i = 0; r == 0 && i < in->n; i++) {
        r = ws_write_file(root, in->v[i].path, in->v[i].data,
                          in->v[i].len, 0644, err);
        if (r < 0)
            sbx_err_wrap(err, "inputs[%zu]", i);
    }
    return r;
}
