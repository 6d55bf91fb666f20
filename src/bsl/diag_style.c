/* The text of the module: LineLength, CanonicalSpellingKeywords, CommentedCode,
 * UsingServiceTag, DuplicateRegion. */
#include "diag.h"

#include <stdlib.h>
#include <string.h>

/* Lower-case ASCII and Cyrillic into buf (the same byte length); at most size-1 bytes. */
static size_t fold(const char *s, size_t len, char *buf, size_t size)
{
    size_t n = len < size ? len : size - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z') {
            buf[i] = (char)(c + 32);
        } else if (c == 0xD0 && i + 1 < n) {
            unsigned char d = (unsigned char)s[i + 1];
            if (d >= 0x90 && d <= 0x9F) {
                buf[i] = (char)0xD0;
                buf[i + 1] = (char)(d + 0x20);
            } else if (d >= 0xA0 && d <= 0xAF) {
                buf[i] = (char)0xD1;
                buf[i + 1] = (char)(d - 0x20);
            } else if (d == 0x81) {
                buf[i] = (char)0xD1;
                buf[i + 1] = (char)0x91;
            } else {
                buf[i] = (char)c;
                buf[i + 1] = (char)d;
            }
            i++;
        } else {
            buf[i] = (char)c;
        }
    }
    buf[n] = 0;
    return n;
}

static void line_length(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    for (size_t l = 0; l < lx->nlines; l++) {
        size_t start = lx->line_off[l];
        size_t end = l + 1 < lx->nlines ? lx->line_off[l + 1] - 1 : lx->len;
        if (end > start && lx->src[end - 1] == '\r')
            end--;
        if (end - start <= BSL_LINE_LENGTH_MAX)
            continue; /* bytes >= code points */
        uint32_t n = bsl_utf8_count(lx->src + start, end - start);
        if (n > BSL_LINE_LENGTH_MAX)
            bsl_emit(c, D_LINE_LENGTH,
                     (struct bsl_range){{(uint32_t)l + 1, 1}, {(uint32_t)l + 1, n + 1}},
                     "The line is %u characters long (at most %d)", n, BSL_LINE_LENGTH_MAX);
    }
}

static bool ascii(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

static void canonical(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const struct bsl_token *t = &lx->toks[i];
        if (t->type != TK_KEYWORD)
            continue;
        if (i > 0 && lx->toks[i - 1].type == TK_OP && lx->toks[i - 1].op == OP_DOT)
            continue; /* a member's name */
        const char *s = lx->src + t->off;
        if (bsl_kw_canonical(t->kw, s, t->len))
            continue;
        bsl_emit(c, D_CANONICAL_SPELLING_KEYWORDS, bsl_tok_range(lx, (uint32_t)i),
                 "The keyword \"%.*s\" should be spelled \"%s\"", (int)t->len, s,
                 ascii(s, t->len) ? bsl_kw_en(t->kw) : bsl_kw_ru(t->kw));
    }
}

/* bsl-language-server's default service tags (lower case). */
static const struct {
    const char *tag;
    bool word; /* must stand alone, not inside a longer word */
} tags[] = {
    {"todo", true},    {"fixme", true},       {"mrg", true}, {"debug", true},
    {"отладка", true}, {"для отладки", true}, {"!!", false},
};

static bool word_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

static void service_tags(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    char buf[1024];
    for (size_t i = 0; i < lx->ncomments; i++) {
        const struct bsl_comment *cm = &lx->comments[i];
        size_t n = fold(lx->src + cm->off + 2, cm->len - 2, buf, sizeof(buf));
        for (size_t k = 0; k < sizeof(tags) / sizeof(tags[0]); k++) {
            const char *p = buf, *hit = NULL;
            size_t tl = strlen(tags[k].tag);
            while ((p = strstr(p, tags[k].tag))) {
                bool before = p > buf && word_char((unsigned char)p[-1]);
                bool after = (size_t)(p - buf) + tl < n && word_char((unsigned char)p[tl]);
                if (!tags[k].word || (!before && !after)) {
                    hit = p;
                    break;
                }
                p += tl;
            }
            if (hit) {
                bsl_emit(c, D_USING_SERVICE_TAG, (struct bsl_range){cm->start, cm->end},
                         "The comment has the service tag \"%.*s\"", (int)tl,
                         lx->src + cm->off + 2 + (hit - buf));
                break;
            }
        }
    }
}

static bool starts_word(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    return n >= wl && !memcmp(s, w, wl) && (n == wl || !word_char((unsigned char)s[wl]));
}

static bool ends_word(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    return n >= wl && !memcmp(s + n - wl, w, wl) &&
           (n == wl || !word_char((unsigned char)s[n - wl - 1]));
}

static bool is_word(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    if (n && s[n - 1] == ';')
        n--;
    return n == wl && !memcmp(s, w, wl);
}

/* Whether a comment's text (folded, trimmed) reads as BSL code. */
/* A comma outside parentheses: prose ("Если ..., тогда"), not a condition. */
static bool prose_comma(const char *s, size_t n)
{
    int depth = 0;
    bool quoted = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            quoted = !quoted;
        else if (!quoted && s[i] == '(')
            depth++;
        else if (!quoted && s[i] == ')' && depth > 0)
            depth--;
        else if (!quoted && !depth && s[i] == ',')
            return true;
    }
    return false;
}

/* A call: a name directly followed by ( somewhere. */
static bool has_call(const char *s, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (s[i] == '(' && word_char((unsigned char)s[i - 1]))
            return true;
    return false;
}

static bool code_like(const char *s, size_t n)
{
    if (!n)
        return false;
    /* a statement: an assignment, a call, or one of these; it starts with a name (not a list
     * item's "-" or a number) */
    if (s[n - 1] == ';' && word_char((unsigned char)s[0]) && !(s[0] >= '0' && s[0] <= '9')) {
        static const char *const starts[] = {"возврат",    "return",   "прервать",          "break",
                                             "продолжить", "continue", "вызватьисключение", "raise",
                                             "перем",      "var",      "перейти",           "goto"};
        if (memchr(s, '=', n) || has_call(s, n))
            return true;
        for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
            if (starts_word(s, n, starts[i]))
                return true;
    }
    static const char *const ends[] = {
        "конецесли",    "endif",       "конеццикла",   "enddo",  "конецпроцедуры", "endprocedure",
        "конецфункции", "endfunction", "конецпопытки", "endtry", "иначе",          "else",
        "попытка",      "try",         "исключение",   "except"};
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
        if (is_word(s, n, ends[i]))
            return true;
    if ((starts_word(s, n, "если") || starts_word(s, n, "иначеесли") || starts_word(s, n, "if") ||
         starts_word(s, n, "elsif")) &&
        (ends_word(s, n, "тогда") || ends_word(s, n, "then")) && !prose_comma(s, n))
        return true;
    if ((starts_word(s, n, "для") || starts_word(s, n, "пока") || starts_word(s, n, "for") ||
         starts_word(s, n, "while")) &&
        (ends_word(s, n, "цикл") || ends_word(s, n, "do")) && !prose_comma(s, n))
        return true;
    if ((starts_word(s, n, "процедура") || starts_word(s, n, "функция") ||
         starts_word(s, n, "procedure") || starts_word(s, n, "function")) &&
        s[n - 1] == ')')
        return true;
    /* Имя(...) or Имя.Метод(...) */
    if (s[n - 1] == ')') {
        size_t i = 0;
        while (i < n && (word_char((unsigned char)s[i]) || s[i] == '.'))
            i++;
        return i > 0 && i < n && s[i] == '(';
    }
    return false;
}

static size_t first_tok_after(const struct bsl_lexed *lx, uint32_t line)
{
    size_t lo = 0, hi = lx->ntoks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lx->toks[mid].start.line <= line)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Runs of whole-line comments that read as code (a method's description, the comments
 * right above it, is not looked at). */
static void commented_code(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    char buf[1024];
    for (size_t i = 0; i < lx->ncomments;) {
        if (!lx->comments[i].own_line) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < lx->ncomments && lx->comments[j].own_line &&
               lx->comments[j].start.line == lx->comments[j - 1].start.line + 1)
            j++;
        uint32_t last = lx->comments[j - 1].start.line;
        size_t next = first_tok_after(lx, last);
        const struct bsl_token *t = next < lx->ntoks ? &lx->toks[next] : NULL;
        bool description =
            t && t->start.line == last + 1 &&
            (t->type == TK_DIRECTIVE ||
             (t->type == TK_KEYWORD && (t->kw == KW_PROCEDURE || t->kw == KW_FUNCTION ||
                                        t->kw == KW_ASYNC || t->kw == KW_VAR)));
        size_t run = SIZE_MAX, run_end = 0;
        for (size_t k = i; k <= j && !description; k++) {
            bool code = false;
            if (k < j) {
                const struct bsl_comment *cm = &lx->comments[k];
                const char *s = lx->src + cm->off + 2;
                size_t n = cm->len - 2;
                bool doc = n && s[0] == '/';
                while (n && (*s == ' ' || *s == '\t')) {
                    s++;
                    n--;
                }
                while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                    n--;
                if (!doc && !n && run != SIZE_MAX)
                    continue; /* a blank comment line inside a run */
                code = !doc && code_like(buf, fold(s, n, buf, sizeof(buf)));
            }
            if (code) {
                if (run == SIZE_MAX)
                    run = k;
                run_end = k;
            } else if (run != SIZE_MAX) {
                bsl_emit(c, D_COMMENTED_CODE,
                         (struct bsl_range){lx->comments[run].start, lx->comments[run_end].end},
                         "Commented-out code");
                run = SIZE_MAX;
            }
        }
        i = j;
    }
}

struct region {
    size_t parent, index;
    uint64_t hash;
};

static int region_cmp(const void *a, const void *b)
{
    const struct region *x = a, *y = b;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Regions of the same name under the same parent: every one after the first. */
static void duplicate_regions(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    size_t n = lx->npps, nr = 0, depth = 0;
    if (!n)
        return;
    struct region *r = malloc(n * sizeof(*r));
    size_t *stack = malloc(n * sizeof(size_t));
    if (!r || !stack) {
        free(r);
        free(stack);
        c->out->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct bsl_pp *p = &lx->pps[i];
        if (p->kind == PP_REGION) {
            if (p->name_len)
                r[nr++] = (struct region){depth ? stack[depth - 1] : n, i,
                                          bsl_name_hash(lx->src + p->name_off, p->name_len)};
            stack[depth++] = i;
        } else if (p->kind == PP_ENDREGION && depth) {
            depth--;
        }
    }
    qsort(r, nr, sizeof(*r), region_cmp);
    for (size_t i = 1, k = 0; i < nr; i++) {
        if (r[k].parent != r[i].parent || r[k].hash != r[i].hash) {
            k = i; /* the first of a new name */
            continue;
        }
        const struct bsl_pp *p = &lx->pps[r[i].index], *q = &lx->pps[r[k].index];
        bsl_emit(c, D_DUPLICATE_REGION, (struct bsl_range){p->start, p->end},
                 "The region \"%.*s\" is already declared on line %u", (int)p->name_len,
                 lx->src + p->name_off, q->start.line);
    }
    free(r);
    free(stack);
}

void bsl_check_style(struct bsl_ctx *c)
{
    if (bsl_on(c, D_LINE_LENGTH))
        line_length(c);
    if (bsl_on(c, D_CANONICAL_SPELLING_KEYWORDS))
        canonical(c);
    if (bsl_on(c, D_USING_SERVICE_TAG))
        service_tags(c);
    if (bsl_on(c, D_COMMENTED_CODE))
        commented_code(c);
    if (bsl_on(c, D_DUPLICATE_REGION))
        duplicate_regions(c);
}
