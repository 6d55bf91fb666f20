/* libcurl helpers (curlx.h). */
#include "curlx.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

size_t curlx_body_cb(char *ptr, size_t size, size_t n, void *data)
{
    struct curlx_body *b = data;
    size_t len = size * n;
    if (b->len + len > b->max) {
        b->over = true;
        return len;
    }
    b->data = sbx_xrealloc(b->data, b->len + len + 1);
    memcpy(b->data + b->len, ptr, len);
    b->len += len;
    b->data[b->len] = '\0';
    return len;
}

size_t curlx_fd_read_cb(char *buf, size_t size, size_t n, void *data)
{
    int fd = *(int *)data;
    for (;;) {
        ssize_t r = read(fd, buf, size * n);
        if (r >= 0)
            return (size_t)r;
        if (errno != EINTR)
            return CURL_READFUNC_ABORT;
    }
}

void curlx_cleanup(CURL **c)
{
    if (*c)
        curl_easy_cleanup(*c);
}

void curlx_slist_cleanup(struct curl_slist **l)
{
    curl_slist_free_all(*l);
}
