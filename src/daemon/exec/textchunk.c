#include "textchunk.h"

#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"

json_t *textchunk_event(struct utf8_carry *c, const char *type, const uint8_t *buf, size_t len,
                        bool flush)
{
    _cleanup_free_ char *all = sbx_xmalloc(c->len + len + 1);
    memcpy(all, c->buf, c->len);
    if (len)
        memcpy(all + c->len, buf, len);
    size_t n = c->len + len;
    size_t keep = flush ? n : sbx_utf8_prefix(all, n);
    c->len = n - keep;
    memcpy(c->buf, all + keep, c->len);
    if (keep == 0)
        return NULL;
    if (sbx_utf8_valid(all, keep))
        return json_pack("{s:s,s:s%}", "type", type, "data", all, keep);
    _cleanup_free_ char *b64 = sbx_base64_encode(all, keep);
    return json_pack("{s:s,s:s,s:s}", "type", type, "data", b64, "encoding", "base64");
}
