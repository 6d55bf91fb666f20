#include "sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

void sse_init(struct sse_parser *p, sse_event_fn fn, void *ud)
{
    memset(p, 0, sizeof(*p));
    p->fn = fn;
    p->ud = ud;
}

void sse_release(struct sse_parser *p)
{
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need > SSE_EVENT_MAX)
        return -EMSGSIZE;
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    *buf = sbx_xrealloc(*buf, n);
    *cap = n;
    return 0;
}

static int dispatch(struct sse_parser *p)
{
    if (!p->has_data)
        return 0;
    p->has_data = 0;
    size_t len = p->data_len;
    p->data_len = 0;
    /* The spec drops the trailing newline the last data line added. */
    if (len && p->data[len - 1] == '\n')
        len--;
    p->data[len] = '\0';
    return p->fn(p->ud, p->data, len);
}

static int end_line(struct sse_parser *p)
{
    const char *l = p->line ? p->line : "";
    size_t n = p->line_len;
    p->line_len = 0;
    if (n == 0)
        return dispatch(p);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t name_len = colon ? (size_t)(colon - l) : n;
    if (name_len != 4 || memcmp(l, "data", 4))
        return 0;
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ')
        v++;
    size_t vlen = (size_t)(l + n - v);
    int r = grow(&p->data, &p->data_cap, p->data_len + vlen + 2);
    if (r < 0)
        return r;
    memcpy(p->data + p->data_len, v, vlen);
    p->data_len += vlen;
    p->data[p->data_len++] = '\n';
    p->has_data = 1;
    return 0;
}

int sse_feed(struct sse_parser *p, const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = buf[i];
        if (p->skip_lf) {
            p->skip_lf = 0;
            if (ch == '\n')
                continue;
        }
        if (ch == '\r' || ch == '\n') {
            p->skip_lf = ch == '\r';
            int r = end_line(p);
            if (r)
                return r;
            continue;
        }
        int r = grow(&p->line, &p->line_cap, p->line_len + 1);
        if (r < 0)
            return r;
        p->line[p->line_len++] = ch;
    }
    return 0;
}
