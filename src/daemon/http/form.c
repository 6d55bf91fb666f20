/* multipart/form-data and urlencoded bodies, through MHD's post processor. */
#include <errno.h>
#include <stdlib.h>

#include "../../common/util.h"
#include "server_int.h"

struct http_form {
    struct MHD_PostProcessor *pp;
    http_form_fn fn;
    void *data;
    int failed; /* the callback's error, kept so feeding stops */
};

static enum MHD_Result form_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *filename, const char *content_type,
                                 const char *transfer_encoding, const char *data, uint64_t off,
                                 size_t size)
{
    struct http_form *f = cls;
    if (f->failed)
        return MHD_NO;
    int r = f->fn(f->data, key, filename, off, data, size);
    if (r < 0) {
        f->failed = r;
        return MHD_NO;
    }
    return MHD_YES;
}

struct http_form *http_form_new(struct http_req *r, http_form_fn fn, void *data)
{
    struct http_form *f = sbx_xcalloc(1, sizeof(*f));
    f->fn = fn;
    f->data = data;
    f->pp = MHD_create_post_processor(r->conn, HTTP_FORM_BUFFER, form_iter, f);
    if (!f->pp) {
        free(f);
        return NULL;
    }
    return f;
}

int http_form_feed(struct http_form *f, const char *buf, size_t len)
{
    if (MHD_post_process(f->pp, buf, len) != MHD_YES)
        return f->failed ? f->failed : -EINVAL;
    return 0;
}

int http_form_finish(struct http_form *f)
{
    struct MHD_PostProcessor *pp = TAKE_PTR(f->pp);
    if (MHD_destroy_post_processor(pp) != MHD_YES)
        return f->failed ? f->failed : -EINVAL;
    return f->failed;
}

void http_form_free(struct http_form *f)
{
    if (!f)
        return;
    if (f->pp)
        (void)MHD_destroy_post_processor(f->pp);
    free(f);
}
