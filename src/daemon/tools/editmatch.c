#include "editmatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"

struct span {
    const char *p;
    size_t len;
};

struct lines {
    struct span *v;
    size_t n;
};

/* A text's lines without their '\n'; a final '\n' ends the last line, it does not start
 * an empty one. */
static void lines_split(const char *t, size_t len, struct lines *out)
{
    size_t cap = 0;
    out->v = NULL;
    out->n = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(t + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - t) : len;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 64;
            out->v = sbx_xrealloc(out->v, cap * sizeof(*out->v));
        }
        out->v[out->n++] = (struct span){t + i, e - i};
        i = e + 1;
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static struct span rstrip(struct span s)
{
    while (s.len && is_blank(s.p[s.len - 1]))
        s.len--;
    return s;
}

static struct span strip(struct span s)
{
    s = rstrip(s);
    while (s.len && is_blank(*s.p)) {
        s.p++;
        s.len--;
    }
    return s;
}

static struct span indent_of(struct span s)
{
    size_t n = 0;
    while (n < s.len && is_blank(s.p[n]))
        n++;
    return (struct span){s.p, n};
}

static bool span_eq(struct span a, struct span b)
{
    return a.len == b.len && !memcmp(a.p, b.p, a.len);
}

static size_t line_of(const char *text, size_t off)
{
    size_t n = 1;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + off - p))); p++)
        n++;
    return n;
}

const char *edit_strategy_name(enum edit_strategy s)
{
    switch (s) {
    case EDIT_EXACT:
        return "exact";
    case EDIT_TRAILING_WS:
        return "trailing_whitespace";
    case EDIT_INDENT:
        return "indentation";
    case EDIT_SIMILAR:
        return "similarity";
    }
    return "exact";
}

void edit_match_clear(struct edit_match *m)
{
    free(m->text);
    memset(m, 0, sizeof(*m));
}

static void cand_add(struct edit_match *m, size_t line, double score, struct span first)
{
    if (m->ncand >= EDIT_CANDIDATES_MAX)
        return;
    struct edit_candidate *c = &m->cand[m->ncand++];
    c->line = line;
    c->score = score;
    first = strip(first);
    size_t n =
        sbx_utf8_prefix(first.p, first.len < EDIT_SNIPPET_MAX ? first.len : EDIT_SNIPPET_MAX);
    memcpy(c->snippet, first.p, n);
    c->snippet[n] = 0;
}

/* "3, 10, 22" of the candidates, for messages. */
static void cand_lines(const struct edit_match *m, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < m->ncand && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%zu", i ? ", " : "", m->cand[i].line);
}

static int refuse_not_unique(struct edit_match *m, size_t count, struct sbx_err *err)
{
    char lines[64];
    cand_lines(m, lines, sizeof(lines));
    return sbx_err_set(err, EEXIST, "edit_not_unique",
                       "old_string matches %zu places (lines %s%s); include more surrounding "
                       "lines to make it unique, or set replace_all",
                       count, lines, count > m->ncand ? ", ..." : "");
}

/* ---- the growing output ---- */

struct out {
    FILE *f;
    char *buf;
    size_t len;
};

static void out_open(struct out *o)
{
    o->buf = NULL;
    o->len = 0;
    o->f = open_memstream(&o->buf, &o->len);
    if (!o->f)
        abort(); /* out of memory, as sbx_xmalloc would */
}

static void out_put(struct out *o, const char *p, size_t n)
{
    if (n)
        fwrite(p, 1, n, o->f);
}

static void out_done(struct out *o, struct edit_match *m)
{
    fclose(o->f);
    m->text = o->buf;
    m->len = o->len;
}

/* new_s with each non-blank line's old indentation (old_ind, or as much leading blank
 * as it has up to that length) replaced by the file's (file_ind). */
static void put_reindented(struct out *o, const char *new_s, struct span file_ind,
                           struct span old_ind)
{
    size_t len = strlen(new_s);
    for (size_t i = 0; i <= len;) {
        const char *nl = memchr(new_s + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - new_s) : len;
        struct span line = {new_s + i, e - i};
        if (strip(line).len) {
            size_t cut = 0;
            if (line.len >= old_ind.len && !memcmp(line.p, old_ind.p, old_ind.len))
                cut = old_ind.len;
            else
                while (cut < old_ind.len && cut < line.len && is_blank(line.p[cut]))
                    cut++;
            out_put(o, file_ind.p, file_ind.len);
            out_put(o, line.p + cut, line.len - cut);
        } else {
            out_put(o, line.p, line.len);
        }
        if (!nl)
            break;
        out_put(o, "\n", 1);
        i = e + 1;
    }
}

/* ---- exact ---- */

static int try_exact(const char *text, size_t len, const char *old_s, const char *new_s,
                     bool replace_all, struct edit_match *m, struct sbx_err *err)
{
    size_t olen = strlen(old_s), count = 0;
    for (const char *p = text; (p = memmem(p, (size_t)(text + len - p), old_s, olen)); p += olen) {
        if (m->ncand < EDIT_CANDIDATES_MAX) {
            const char *ls = p;
            while (ls > text && ls[-1] != '\n')
                ls--;
            const char *le = memchr(p, '\n', (size_t)(text + len - p));
            cand_add(m, line_of(text, (size_t)(p - text)), 1.0,
                     (struct span){ls, (size_t)((le ? le : text + len) - ls)});
        }
        count++;
    }
    if (count == 0)
        return 0;
    if (count > 1 && !replace_all)
        return refuse_not_unique(m, count, err);
    struct out o;
    out_open(&o);
    const char *at = text;
    for (const char *p = text; (p = memmem(p, (size_t)(text + len - p), old_s, olen)); p += olen) {
        out_put(&o, at, (size_t)(p - at));
        out_put(&o, new_s, strlen(new_s));
        at = p + olen;
    }
    out_put(&o, at, (size_t)(text + len - at));
    out_done(&o, m);
    m->strategy = EDIT_EXACT;
    m->score = 1.0;
    m->replacements = count;
    m->first_line = m->cand[0].line;
    m->ncand = 0;
    return 1;
}

/* ---- line windows ---- */

struct ctx {
    const char *text;
    size_t len;
    struct lines t, o;
    bool old_nl;      /* old_string ended with '\n': the match takes the line's newline too */
    size_t first_ink; /* index of old's first non-blank line */
};

static bool window_eq(const struct ctx *c, size_t i, enum edit_strategy s)
{
    for (size_t k = 0; k < c->o.n; k++) {
        struct span a = c->t.v[i + k], b = c->o.v[k];
        if (s == EDIT_TRAILING_WS ? !span_eq(rstrip(a), rstrip(b)) : !span_eq(strip(a), strip(b)))
            return false;
    }
    return true;
}

static size_t window_start(const struct ctx *c, size_t i)
{
    return (size_t)(c->t.v[i].p - c->text);
}

static size_t window_end(const struct ctx *c, size_t i)
{
    struct span last = c->t.v[i + c->o.n - 1];
    size_t end = (size_t)(last.p + last.len - c->text);
    if (c->old_nl && end < c->len && c->text[end] == '\n')
        end++;
    return end;
}

/* Write the replacement for window i. */
static void put_replacement(struct out *o, const struct ctx *c, size_t i, const char *new_s,
                            enum edit_strategy s)
{
    if (s == EDIT_TRAILING_WS) {
        out_put(o, new_s, strlen(new_s));
        return;
    }
    struct span file_line = c->t.v[i + c->first_ink];
    for (size_t k = 0; !strip(file_line).len && k < c->o.n; k++)
        file_line = c->t.v[i + k];
    put_reindented(o, new_s, indent_of(file_line), indent_of(c->o.v[c->first_ink]));
}

static void splice(struct ctx *c, const size_t *starts, size_t n, const char *new_s,
                   enum edit_strategy s, struct edit_match *m)
{
    struct out o;
    out_open(&o);
    size_t at = 0;
    for (size_t j = 0; j < n; j++) {
        out_put(&o, c->text + at, window_start(c, starts[j]) - at);
        put_replacement(&o, c, starts[j], new_s, s);
        at = window_end(c, starts[j]);
    }
    out_put(&o, c->text + at, c->len - at);
    out_done(&o, m);
    m->strategy = s;
    m->replacements = n;
    m->first_line = starts[0] + 1;
}

static int try_lines(struct ctx *c, const char *new_s, bool replace_all, enum edit_strategy s,
                     struct edit_match *m, struct sbx_err *err)
{
    if (c->o.n == 0 || c->t.n < c->o.n)
        return 0;
    size_t *starts = NULL, n = 0;
    for (size_t i = 0; i + c->o.n <= c->t.n; i++) {
        if (!window_eq(c, i, s))
            continue;
        starts = sbx_xrealloc(starts, (n + 1) * sizeof(*starts));
        starts[n++] = i;
        i += c->o.n - 1; /* matches do not overlap */
    }
    int r = 0;
    if (n > 1 && !replace_all) {
        for (size_t j = 0; j < n; j++)
            cand_add(m, starts[j] + 1, 1.0, c->t.v[starts[j] + c->first_ink]);
        r = refuse_not_unique(m, n, err);
    } else if (n) {
        splice(c, starts, n, new_s, s, m);
        m->score = 1.0;
        r = 1;
    }
    free(starts);
    return r;
}

/* ---- similarity ---- */

struct lev {
    unsigned *row;
    size_t cap;
    size_t cells;
};

static size_t lev_distance(struct lev *l, struct span a, struct span b)
{
    if (b.len + 1 > l->cap) {
        l->cap = b.len + 1;
        l->row = sbx_xrealloc(l->row, l->cap * sizeof(*l->row));
    }
    unsigned *row = l->row;
    for (size_t j = 0; j <= b.len; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= a.len; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= b.len; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a.p[i - 1] != b.p[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    l->cells += a.len * b.len;
    return row[b.len];
}

double edit_similarity(const char *a, size_t alen, const char *b, size_t blen, size_t *cells)
{
    size_t m = alen > blen ? alen : blen;
    if (m == 0)
        return 1.0;
    struct lev l = {0};
    size_t d = lev_distance(&l, (struct span){a, alen}, (struct span){b, blen});
    free(l.row);
    if (cells)
        *cells += l.cells;
    return (double)(m - d) / (double)m;
}

/* Character-weighted similarity of window i to old_string, lines compared trimmed. */
static double window_score(const struct ctx *c, size_t i, struct lev *l)
{
    size_t num = 0, den = 0;
    for (size_t k = 0; k < c->o.n; k++) {
        struct span a = strip(c->t.v[i + k]), b = strip(c->o.v[k]);
        size_t m = a.len > b.len ? a.len : b.len, d;
        if (m == 0)
            continue;
        if (a.len > EDIT_FUZZY_LINE_MAX || b.len > EDIT_FUZZY_LINE_MAX)
            d = span_eq(a, b) ? 0 : m;
        else
            d = lev_distance(l, a, b);
        num += m - d;
        den += m;
    }
    return den ? (double)num / (double)den : 1.0;
}

static int try_similar(struct ctx *c, const char *new_s, struct edit_match *m, struct sbx_err *err)
{
    size_t nwin = c->t.n >= c->o.n ? c->t.n - c->o.n + 1 : 0;
    if (c->o.n == 0 || nwin == 0)
        return sbx_err_set(err, ENOENT, "edit_no_match", "old_string was not found in the file");
    double *score = sbx_xcalloc(nwin, sizeof(*score));
    struct lev l = {0};
    size_t scored = 0;
    for (; scored < nwin && l.cells <= EDIT_FUZZY_BUDGET; scored++)
        score[scored] = window_score(c, scored, &l);
    free(l.row);
    /* The best windows that do not overlap each other. */
    size_t pick[EDIT_CANDIDATES_MAX], npick = 0;
    while (npick < EDIT_CANDIDATES_MAX) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < scored; i++) {
            bool overlaps = false;
            for (size_t j = 0; j < npick && !overlaps; j++)
                overlaps = (i > pick[j] ? i - pick[j] : pick[j] - i) < c->o.n;
            if (!overlaps && (best == SIZE_MAX || score[i] > score[best]))
                best = i;
        }
        if (best == SIZE_MAX)
            break;
        pick[npick++] = best;
    }
    for (size_t j = 0; j < npick; j++)
        cand_add(m, pick[j] + 1, score[pick[j]], c->t.v[pick[j] + c->first_ink]);
    double top = npick ? score[pick[0]] : 0;
    int r;
    if (npick && top >= EDIT_SIMILARITY_MIN && npick > 1 && score[pick[1]] >= EDIT_SIMILARITY_MIN &&
        top - score[pick[1]] < EDIT_SIMILARITY_MARGIN) {
        r = refuse_not_unique(m, npick, err);
    } else if (npick && top >= EDIT_SIMILARITY_MIN) {
        splice(c, pick, 1, new_s, EDIT_SIMILAR, m);
        m->score = top;
        m->ncand = 0;
        r = 1;
    } else {
        char lines[64];
        cand_lines(m, lines, sizeof(lines));
        r = sbx_err_set(err, ENOENT, "edit_no_match",
                        "old_string was not found; the most similar text is at line%s %s "
                        "(similarity %.2f, below %.2f)%s",
                        npick > 1 ? "s" : "", npick ? lines : "-", top, EDIT_SIMILARITY_MIN,
                        scored < nwin ? "; the file was too large to search it all" : "");
    }
    free(score);
    return r;
}

int edit_replace(const char *text, size_t len, const char *old_s, const char *new_s,
                 bool replace_all, struct edit_match *m, struct sbx_err *err)
{
    memset(m, 0, sizeof(*m));
    if (!*old_s)
        return sbx_err_set(err, EINVAL, "invalid_request", "old_string must not be empty");
    int r = try_exact(text, len, old_s, new_s, replace_all, m, err);
    if (r != 0)
        return r < 0 ? r : 0;
    m->ncand = 0;
    struct ctx c = {.text = text, .len = len};
    size_t olen = strlen(old_s);
    lines_split(text, len, &c.t);
    lines_split(old_s, olen, &c.o);
    c.old_nl = olen && old_s[olen - 1] == '\n';
    while (c.first_ink < c.o.n && !strip(c.o.v[c.first_ink]).len)
        c.first_ink++;
    if (c.first_ink == c.o.n) /* old_string is all blank: only an exact match is meaningful */
        r = sbx_err_set(err, ENOENT, "edit_no_match", "old_string (only whitespace) was not found");
    if (r == 0)
        r = try_lines(&c, new_s, replace_all, EDIT_TRAILING_WS, m, err);
    if (r == 0)
        r = try_lines(&c, new_s, replace_all, EDIT_INDENT, m, err);
    if (r == 0)
        r = try_similar(&c, new_s, m, err);
    free(c.t.v);
    free(c.o.v);
    return r < 0 ? r : 0;
}

/* ---- the unified diff of an edit ---- */

/* Line i of t with whether a '\n' ends it. */
static bool line_nl(const char *text, size_t len, struct span s)
{
    return (size_t)(s.p + s.len - text) < len;
}

static bool line_same(const char *a, size_t alen, struct span x, const char *b, size_t blen,
                      struct span y)
{
    return span_eq(x, y) && line_nl(a, alen, x) == line_nl(b, blen, y);
}

static void put_line(struct out *o, char mark, const char *text, size_t len, struct span s)
{
    out_put(o, &mark, 1);
    out_put(o, s.p, s.len);
    out_put(o, "\n", 1);
    if (!line_nl(text, len, s))
        out_put(o, "\\ No newline at end of file\n", 28);
}

char *edit_unified_diff(const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
    struct lines x, y;
    lines_split(a, alen, &x);
    lines_split(b, blen, &y);
    size_t pre = 0, suf = 0;
    while (pre < x.n && pre < y.n && line_same(a, alen, x.v[pre], b, blen, y.v[pre]))
        pre++;
    while (suf < x.n - pre && suf < y.n - pre &&
           line_same(a, alen, x.v[x.n - 1 - suf], b, blen, y.v[y.n - 1 - suf]))
        suf++;
    struct out o;
    out_open(&o);
    if (pre < x.n || pre < y.n) {
        size_t from = pre > EDIT_DIFF_CONTEXT ? pre - EDIT_DIFF_CONTEXT : 0;
        size_t tail = suf > EDIT_DIFF_CONTEXT ? EDIT_DIFF_CONTEXT : suf;
        size_t xe = x.n - suf + tail, ye = y.n - suf + tail;
        size_t xn = xe - from, yn = ye - from;
        fprintf(o.f, "--- a/%s\n+++ b/%s\n@@ -%zu,%zu +%zu,%zu @@\n", path, path,
                xn ? from + 1 : from, xn, yn ? from + 1 : from, yn);
        for (size_t i = from; i < pre; i++)
            put_line(&o, ' ', a, alen, x.v[i]);
        for (size_t i = pre; i < x.n - suf; i++)
            put_line(&o, '-', a, alen, x.v[i]);
        for (size_t i = pre; i < y.n - suf; i++)
            put_line(&o, '+', b, blen, y.v[i]);
        for (size_t i = x.n - suf; i < xe; i++)
            put_line(&o, ' ', a, alen, x.v[i]);
    }
    free(x.v);
    free(y.v);
    struct edit_match m = {0};
    out_done(&o, &m);
    return m.text;
}
