#include "shrecord.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

size_t shrecord_scan(const char *buf, size_t len, size_t *scanned, int *nuls)
{
    while (*scanned < len && *nuls < SHRECORD_FIELDS)
        *nuls += buf[(*scanned)++] == '\0';
    return *nuls == SHRECORD_FIELDS ? *scanned : 0;
}

void shrecord_split(const char *rec, size_t len, struct shrecord *out)
{
    const char *p = rec, *end = rec + len;
    for (int i = 0; i < SHRECORD_FIELDS; i++) {
        const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        out->f[i] = nul ? p : "";
        out->len[i] = nul ? (size_t)(nul - p) : 0;
        p = nul ? nul + 1 : end;
    }
}

struct name {
    const char *s;
    size_t len;
};

static int name_cmp(const void *x, const void *y)
{
    const struct name *a = x, *b = y;
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The names `declare -FLAGS NAME[=V]` lines declare (one line each: bash quotes newlines),
 * sorted for lookup. */
static struct name *names_of_exports(const char *p, size_t len, size_t *n, bool *odd)
{
    const char *end = p + len;
    struct name *v = NULL;
    size_t cap = 0;
    *n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *sp = (size_t)(eol - p) > 9 && !memcmp(p, "declare -", 9)
                             ? memchr(p + 9, ' ', (size_t)(eol - p - 9))
                             : NULL;
        if (sp) {
            const char *name = sp + 1, *ne = name;
            while (ne < eol && *ne != '=')
                ne++;
            *odd |= sp != p + 10 || p[9] != 'x' || ne == eol;
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                v = sbx_xrealloc(v, cap * sizeof(*v));
            }
            v[(*n)++] = (struct name){name, (size_t)(ne - name)};
        }
        p = eol + 1;
    }
    if (*n)
        qsort(v, *n, sizeof(*v), name_cmp);
    return v;
}

char *shrecord_norm(const char *exports, size_t exports_len, const char *dump, size_t dump_len,
                    size_t *out_len, bool *odd)
{
    size_t n;
    _cleanup_free_ struct name *exported = names_of_exports(exports, exports_len, &n, odd);
    char *out = sbx_xmalloc(dump_len + 1), *o = out;
    const char *end = dump + dump_len, *names_end = memchr(dump, '\1', dump_len);
    if (!names_end)
        names_end = end;
    for (const char *p = dump; p < names_end;) {
        const char *sp = memchr(p, ' ', (size_t)(names_end - p));
        const char *te = sp ? sp : names_end;
        struct name key = {p, (size_t)(te - p)};
        if (te > p && !(n && bsearch(&key, exported, n, sizeof(*exported), name_cmp))) {
            memcpy(o, p, (size_t)(te - p) + (sp != NULL));
            o += te - p + (sp != NULL);
        }
        p = te + 1;
    }
    memcpy(o, names_end, (size_t)(end - names_end));
    o += end - names_end;
    *o = '\0';
    *out_len = (size_t)(o - out);
    return out;
}
