#include "exportrd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"

enum { S_HEAD, S_LEN, S_DATA };

void export_reader_init(struct export_reader *r, const struct export_reader_ops *ops, void *data)
{
    memset(r, 0, sizeof(*r));
    r->ops = ops;
    r->data = data;
    r->state = S_HEAD;
}

json_t *export_name_json(const char *path)
{
    size_t n = strlen(path);
    if (sbx_utf8_valid(path, n))
        return json_string(path);
    _cleanup_free_ char *b64 = sbx_base64_encode(path, n);
    return json_pack("{s:s}", "b64", b64);
}

char *export_name_of(const json_t *v)
{
    const char *s = json_string_value(v);
    if (s)
        return strlen(s) <= WS_PATH_MAX ? sbx_xstrdup(s) : NULL;
    const char *b64 = json_string_value(json_object_get(v, "b64"));
    size_t len = b64 ? strlen(b64) : 0;
    if (!b64 || len > (WS_PATH_MAX + 2) / 3 * 4)
        return NULL;
    char *out = sbx_xmalloc(len * 3 / 4 + 1);
    size_t n = 0;
    if (sbx_base64_decode(b64, len, (unsigned char *)out, &n) < 0 || !n || n > WS_PATH_MAX ||
        memchr(out, '\0', n)) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    return out;
}

static int head_done(struct export_reader *r, struct sbx_err *err)
{
    r->head[r->head_len] = '\0';
    r->head_len = 0;
    json_t *h = json_loads(r->head, 0, NULL);
    _cleanup_free_ char *path = export_name_of(json_object_get(h, "path"));
    int ret;
    if (!path || ws_name_check(path, false, err) < 0)
        ret = sbx_err_set(err, EPROTO, "internal", "the file helper sent a bad header");
    else
        ret = r->ops->on_file(h, path, r->data, err);
    json_decref(h);
    return ret;
}

int export_reader_feed(struct export_reader *r, const uint8_t *buf, size_t len,
                       struct sbx_err *err)
{
    size_t i = 0;
    int ret;
    while (i < len) {
        if (r->state == S_HEAD) {
            char ch = (char)buf[i++];
            if (ch != '\n') {
                if (r->head_len + 1 >= sizeof(r->head))
                    return sbx_err_set(err, EPROTO, "internal", "a header line is too long");
                r->head[r->head_len++] = ch;
                continue;
            }
            if ((ret = head_done(r, err)) < 0)
                return ret;
            r->state = S_LEN;
        } else if (r->state == S_LEN) {
            r->head[r->head_len++] = (char)buf[i++];
            if (r->head_len < 8)
                continue;
            r->head[8] = '\0';
            r->head_len = 0;
            char *end;
            r->left = strtoull(r->head, &end, 16);
            if (*end)
                return sbx_err_set(err, EPROTO, "internal", "a chunk length is not hex");
            if (r->left == 0) {
                if ((ret = r->ops->on_end(r->data, err)) < 0)
                    return ret;
                r->state = S_HEAD;
            } else {
                r->state = S_DATA;
            }
        } else {
            size_t n = len - i < r->left ? len - i : (size_t)r->left;
            if ((ret = r->ops->on_bytes(buf + i, n, r->data, err)) < 0)
                return ret;
            i += n;
            r->left -= n;
            if (!r->left)
                r->state = S_LEN;
        }
    }
    return 0;
}

bool export_reader_complete(const struct export_reader *r)
{
    return r->state == S_HEAD && r->head_len == 0;
}
