#include "lexer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bsl_err_set(struct bsl_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

/* ---- names ---- */

/* The next code point of s[*i..len), folded to lower case for ASCII and Cyrillic; a byte
 * that does not start a valid sequence is taken as itself. */
static uint32_t next_folded(const unsigned char *s, size_t len, size_t *i)
{
    unsigned c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    }
    uint32_t cp;
    size_t n;
    if ((c & 0xE0) == 0xC0) {
        cp = c & 0x1F;
        n = 2;
    } else if ((c & 0xF0) == 0xE0) {
        cp = c & 0x0F;
        n = 3;
    } else if ((c & 0xF8) == 0xF0) {
        cp = c & 0x07;
        n = 4;
    } else {
        (*i)++;
        return 0x110000u + c;
    }
    if (*i + n > len) {
        (*i)++;
        return 0x110000u + c;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[*i + k] & 0xC0) != 0x80) {
            (*i)++;
            return 0x110000u + c;
        }
        cp = cp << 6 | (s[*i + k] & 0x3F);
    }
    *i += n;
    if (cp >= 0x410 && cp <= 0x42F)
        return cp + 0x20;
    if (cp == 0x401)
        return 0x451;
    return cp;
}

uint64_t bsl_name_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len;) {
        h ^= next_folded((const unsigned char *)s, len, &i);
        h *= 0x100000001b3ull;
    }
    return h;
}

bool bsl_name_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen) /* folding keeps every byte length */
        return false;
    size_t i = 0, j = 0;
    while (i < alen && j < blen)
        if (next_folded((const unsigned char *)a, alen, &i) !=
            next_folded((const unsigned char *)b, blen, &j))
            return false;
    return i == alen && j == blen;
}

uint32_t bsl_utf8_count(const char *s, size_t len)
{
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Canonical spellings (bsl-language-server's CanonicalSpellingKeywords): the first of each
 * language is the one we suggest. */
static const struct {
    const char *ru, *en, *alt[4];
} kws[KW_COUNT_] = {
    [KW_PROCEDURE] = {"Процедура", "Procedure", {0}},
    [KW_ENDPROCEDURE] = {"КонецПроцедуры", "EndProcedure", {0}},
    [KW_FUNCTION] = {"Функция", "Function", {0}},
    [KW_ENDFUNCTION] = {"КонецФункции", "EndFunction", {0}},
    [KW_VAR] = {"Перем", "Var", {0}},
    [KW_EXPORT] = {"Экспорт", "Export", {0}},
    [KW_VAL] = {"Знач", "Val", {0}},
    [KW_IF] = {"Если", "If", {0}},
    [KW_THEN] = {"Тогда", "Then", {0}},
    [KW_ELSIF] = {"ИначеЕсли", "ElsIf", {0}},
    [KW_ELSE] = {"Иначе", "Else", {0}},
    [KW_ENDIF] = {"КонецЕсли", "EndIf", {0}},
    [KW_FOR] = {"Для", "For", {0}},
    [KW_EACH] = {"Каждого", "Each", {"каждого"}}, /* "Для каждого", as the configurator types it */
    [KW_IN] = {"Из", "In", {0}},
    [KW_TO] = {"По", "To", {0}},
    [KW_WHILE] = {"Пока", "While", {0}},
    [KW_DO] = {"Цикл", "Do", {0}},
    [KW_ENDDO] = {"КонецЦикла", "EndDo", {0}},
    [KW_BREAK] = {"Прервать", "Break", {0}},
    [KW_CONTINUE] = {"Продолжить", "Continue", {0}},
    [KW_RETURN] = {"Возврат", "Return", {0}},
    [KW_TRY] = {"Попытка", "Try", {0}},
    [KW_EXCEPT] = {"Исключение", "Except", {0}},
    [KW_RAISE] = {"ВызватьИсключение", "Raise", {0}},
    [KW_ENDTRY] = {"КонецПопытки", "EndTry", {0}},
    [KW_NEW] = {"Новый", "New", {0}},
    [KW_AND] = {"И", "AND", {"And"}},
    [KW_OR] = {"Или", "OR", {"ИЛИ", "Or"}},
    [KW_NOT] = {"Не", "NOT", {"НЕ", "Not"}},
    [KW_TRUE] = {"Истина", "True", {"ИСТИНА", "TRUE"}},
    [KW_FALSE] = {"Ложь", "False", {"ЛОЖЬ", "FALSE"}},
    [KW_UNDEFINED] = {"Неопределено", "Undefined", {"НЕОПРЕДЕЛЕНО", "UNDEFINED"}},
    [KW_NULL] = {"NULL", "Null", {0}},
    [KW_GOTO] = {"Перейти", "Goto", {0}},
    [KW_EXECUTE] = {"Выполнить", "Execute", {0}},
    [KW_ADDHANDLER] = {"ДобавитьОбработчик", "AddHandler", {0}},
    [KW_REMOVEHANDLER] = {"УдалитьОбработчик", "RemoveHandler", {0}},
    [KW_ASYNC] = {"Асинх", "Async", {0}},
    [KW_AWAIT] = {"Ждать", "Await", {0}},
};

const char *bsl_kw_ru(enum bsl_kw k)
{
    return k > KW_NONE && k < KW_COUNT_ ? kws[k].ru : "";
}
const char *bsl_kw_en(enum bsl_kw k)
{
    return k > KW_NONE && k < KW_COUNT_ ? kws[k].en : "";
}

enum bsl_kw bsl_keyword(const char *s, size_t len)
{
    if (len > BSL_KW_BYTES_MAX)
        return KW_NONE;
    for (int k = KW_NONE + 1; k < KW_COUNT_; k++) {
        if (bsl_name_eq(s, len, kws[k].ru, strlen(kws[k].ru)) ||
            bsl_name_eq(s, len, kws[k].en, strlen(kws[k].en)))
            return (enum bsl_kw)k;
    }
    return KW_NONE;
}

static bool same(const char *a, const char *s, size_t len)
{
    return a && strlen(a) == len && !memcmp(a, s, len);
}

bool bsl_kw_canonical(enum bsl_kw k, const char *s, size_t len)
{
    if (k <= KW_NONE || k >= KW_COUNT_)
        return true;
    if (same(kws[k].ru, s, len) || same(kws[k].en, s, len))
        return true;
    for (size_t i = 0; i < 4; i++)
        if (same(kws[k].alt[i], s, len))
            return true;
    return false;
}

/* ---- the scanner ---- */

struct scan {
    struct bsl_lexed *lx;
    const char *s;
    size_t len, i;
    uint32_t line;     /* current line, 1-based */
    size_t mark_off;   /* an offset on the current line ... */
    uint32_t mark_col; /* ... and its column */
    uint32_t last_tok_line;
    struct bsl_err *err;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, nc * size);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int new_line(struct scan *sc, size_t start)
{
    struct bsl_lexed *lx = sc->lx;
    if (grow((void **)&lx->line_off, &lx->cap_lines, lx->nlines, sizeof(uint32_t)) < 0)
        return -ENOMEM;
    lx->line_off[lx->nlines++] = (uint32_t)start;
    sc->line++;
    sc->mark_off = start;
    sc->mark_col = 1;
    return 0;
}

/* The position of off, which is on the current line at or after the mark. */
static struct bsl_pos pos_at(struct scan *sc, size_t off)
{
    sc->mark_col += bsl_utf8_count(sc->s + sc->mark_off, off - sc->mark_off);
    sc->mark_off = off;
    return (struct bsl_pos){sc->line, sc->mark_col};
}

static bool ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool ident_char(unsigned char c)
{
    return ident_start(c) || (c >= '0' && c <= '9');
}

/* A non-breaking space (U+00A0) counts as a blank. */
static size_t blank_len(const char *s, size_t len, size_t i)
{
    unsigned char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v')
        return 1;
    if (c == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] == 0xA0)
        return 2;
    if (c == 0xEF && i + 2 < len && (unsigned char)s[i + 1] == 0xBB &&
        (unsigned char)s[i + 2] == 0xBF)
        return 3; /* a stray BOM */
    return 0;
}

static size_t ident_end(const char *s, size_t len, size_t i)
{
    while (i < len && ident_char((unsigned char)s[i]) && !blank_len(s, len, i))
        i++;
    return i;
}

static int push_tok(struct scan *sc, enum bsl_tok_type type, size_t start, size_t end,
                    struct bsl_pos sp, uint8_t flags)
{
    struct bsl_lexed *lx = sc->lx;
    if (grow((void **)&lx->toks, &lx->cap_toks, lx->ntoks, sizeof(struct bsl_token)) < 0)
        return -ENOMEM;
    struct bsl_token *t = &lx->toks[lx->ntoks++];
    memset(t, 0, sizeof(*t));
    t->type = (uint8_t)type;
    t->off = (uint32_t)start;
    t->len = (uint32_t)(end - start);
    t->start = sp;
    t->end = pos_at(sc, end);
    t->flags = flags;
    if (sp.line != sc->last_tok_line)
        t->flags |= BSL_TF_LINE_START;
    sc->last_tok_line = t->end.line;
    if (type == TK_IDENT) {
        t->kw = (uint8_t)bsl_keyword(sc->s + start, end - start);
        if (t->kw)
            t->type = TK_KEYWORD;
        t->hash = bsl_name_hash(sc->s + start, end - start);
    }
    return 0;
}

/* After the newline at sc->i, a string goes on when the next line (past blanks and whole
 * comment lines) starts with |. On success sc->i is past that | and the lines are counted;
 * otherwise nothing moved. */
static int string_goes_on(struct scan *sc, bool *on)
{
    size_t j = sc->i, nlines = sc->lx->nlines;
    uint32_t line = sc->line;
    size_t mo = sc->mark_off;
    uint32_t mc = sc->mark_col;
    *on = false;
    while (j < sc->len && sc->s[j] == '\n') {
        j++;
        if (new_line(sc, j) < 0)
            return -ENOMEM;
        size_t b;
        while (j < sc->len && (b = blank_len(sc->s, sc->len, j)))
            j += b;
        if (j < sc->len && sc->s[j] == '|') {
            sc->i = j + 1;
            *on = true;
            return 0;
        }
        if (j < sc->len && sc->s[j] == '\n')
            continue; /* an empty line inside a query text: the platform takes it */
        if (j + 1 < sc->len && sc->s[j] == '/' && sc->s[j + 1] == '/') {
            while (j < sc->len && sc->s[j] != '\n')
                j++;
            continue;
        }
        break;
    }
    sc->lx->nlines = nlines;
    sc->line = line;
    sc->mark_off = mo;
    sc->mark_col = mc;
    return 0;
}

static int lex_string(struct scan *sc)
{
    size_t start = sc->i;
    struct bsl_pos sp = pos_at(sc, start);
    sc->i++;
    for (;;) {
        if (sc->i >= sc->len)
            return push_tok(sc, TK_STRING, start, sc->i, sp, BSL_TF_UNTERMINATED);
        char c = sc->s[sc->i];
        if (c == '"') {
            if (sc->i + 1 < sc->len && sc->s[sc->i + 1] == '"') {
                sc->i += 2;
                continue;
            }
            sc->i++;
            return push_tok(sc, TK_STRING, start, sc->i, sp, 0);
        }
        if (c == '\n') {
            bool on;
            if (string_goes_on(sc, &on) < 0)
                return -ENOMEM;
            if (!on)
                return push_tok(sc, TK_STRING, start, sc->i, sp, BSL_TF_UNTERMINATED);
            continue;
        }
        sc->i++;
    }
}

static int lex_date(struct scan *sc)
{
    size_t start = sc->i;
    struct bsl_pos sp = pos_at(sc, start);
    sc->i++;
    while (sc->i < sc->len && sc->s[sc->i] != '\'' && sc->s[sc->i] != '\n')
        sc->i++;
    if (sc->i < sc->len && sc->s[sc->i] == '\'') {
        sc->i++;
        return push_tok(sc, TK_DATE, start, sc->i, sp, 0);
    }
    return push_tok(sc, TK_DATE, start, sc->i, sp, BSL_TF_UNTERMINATED);
}

static int lex_comment(struct scan *sc, bool own_line)
{
    struct bsl_lexed *lx = sc->lx;
    size_t start = sc->i;
    while (sc->i < sc->len && sc->s[sc->i] != '\n')
        sc->i++;
    if (grow((void **)&lx->comments, &lx->cap_comments, lx->ncomments, sizeof(struct bsl_comment)) <
        0)
        return -ENOMEM;
    struct bsl_comment *c = &lx->comments[lx->ncomments++];
    c->off = (uint32_t)start;
    c->start = pos_at(sc, start);
    size_t end = sc->i;
    if (end > start && sc->s[end - 1] == '\r')
        end--;
    c->len = (uint32_t)(end - start);
    c->end = pos_at(sc, end);
    c->own_line = own_line;
    return 0;
}

static const struct {
    const char *ru, *en;
    enum bsl_pp_kind kind;
} pp_words[] = {
    {"Область", "Region", PP_REGION},
    {"КонецОбласти", "EndRegion", PP_ENDREGION},
    {"Если", "If", PP_IF},
    {"ИначеЕсли", "ElsIf", PP_ELSIF},
    {"Иначе", "Else", PP_ELSE},
    {"КонецЕсли", "EndIf", PP_ENDIF},
    {"Использовать", "Use", PP_USE},
};

static int lex_preproc(struct scan *sc)
{
    struct bsl_lexed *lx = sc->lx;
    size_t start = sc->i, j = sc->i + 1, b;
    while (sc->i < sc->len && sc->s[sc->i] != '\n')
        sc->i++;
    size_t end = sc->i;
    while (end > start &&
           (sc->s[end - 1] == '\r' || sc->s[end - 1] == ' ' || sc->s[end - 1] == '\t'))
        end--;
    if (grow((void **)&lx->pps, &lx->cap_pps, lx->npps, sizeof(struct bsl_pp)) < 0)
        return -ENOMEM;
    struct bsl_pp *p = &lx->pps[lx->npps++];
    memset(p, 0, sizeof(*p));
    p->off = (uint32_t)start;
    p->len = (uint32_t)(end - start);
    p->start = pos_at(sc, start);
    p->end = pos_at(sc, end);
    p->kind = PP_OTHER;
    while (j < end && (b = blank_len(sc->s, end, j)))
        j += b;
    size_t we = ident_end(sc->s, end, j);
    for (size_t k = 0; k < sizeof(pp_words) / sizeof(pp_words[0]); k++)
        if (bsl_name_eq(sc->s + j, we - j, pp_words[k].ru, strlen(pp_words[k].ru)) ||
            bsl_name_eq(sc->s + j, we - j, pp_words[k].en, strlen(pp_words[k].en))) {
            p->kind = (uint8_t)pp_words[k].kind;
            break;
        }
    if (p->kind == PP_REGION) {
        j = we;
        while (j < end && (b = blank_len(sc->s, end, j)))
            j += b;
        size_t ne = ident_end(sc->s, end, j);
        p->name_off = (uint32_t)j;
        p->name_len = (uint32_t)(ne - j);
    }
    return 0;
}

static const struct {
    char a, b;
    enum bsl_op op;
} ops2[] = {{'<', '>', OP_NE}, {'<', '=', OP_LE}, {'>', '=', OP_GE}};

static enum bsl_op op1(char c)
{
    switch (c) {
    case '(':
        return OP_LPAREN;
    case ')':
        return OP_RPAREN;
    case '[':
        return OP_LBRACK;
    case ']':
        return OP_RBRACK;
    case ',':
        return OP_COMMA;
    case ';':
        return OP_SEMI;
    case '.':
        return OP_DOT;
    case ':':
        return OP_COLON;
    case '?':
        return OP_QUESTION;
    case '+':
        return OP_PLUS;
    case '-':
        return OP_MINUS;
    case '*':
        return OP_STAR;
    case '/':
        return OP_SLASH;
    case '%':
        return OP_PERCENT;
    case '=':
        return OP_EQ;
    case '<':
        return OP_LT;
    case '>':
        return OP_GT;
    default:
        return OP_NONE;
    }
}

static int scan_one(struct scan *sc, bool *line_blank)
{
    const char *s = sc->s;
    size_t i = sc->i, b;
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') {
        sc->i++;
        *line_blank = true;
        return new_line(sc, sc->i);
    }
    if ((b = blank_len(s, sc->len, i))) {
        sc->i += b;
        return 0;
    }
    bool first = *line_blank;
    *line_blank = false;
    if (c == '/' && i + 1 < sc->len && s[i + 1] == '/')
        return lex_comment(sc, first);
    if (c == '#' && first)
        return lex_preproc(sc);
    if (c == '"')
        return lex_string(sc);
    if (c == '\'')
        return lex_date(sc);
    struct bsl_pos sp = pos_at(sc, i);
    if (c >= '0' && c <= '9') {
        size_t j = i;
        while (j < sc->len && s[j] >= '0' && s[j] <= '9')
            j++;
        if (j + 1 < sc->len && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
            j++;
            while (j < sc->len && s[j] >= '0' && s[j] <= '9')
                j++;
        }
        sc->i = j;
        return push_tok(sc, TK_NUMBER, i, j, sp, 0);
    }
    if (ident_start(c) && !blank_len(s, sc->len, i)) {
        size_t j = ident_end(s, sc->len, i);
        if (j == i) /* a lone invalid byte */
            j = i + 1;
        sc->i = j;
        return push_tok(sc, TK_IDENT, i, j, sp, 0);
    }
    if ((c == '&' || c == '~') && i + 1 < sc->len && ident_start((unsigned char)s[i + 1])) {
        size_t j = ident_end(s, sc->len, i + 1);
        sc->i = j;
        return push_tok(sc, c == '&' ? TK_DIRECTIVE : TK_LABEL, i, j, sp, 0);
    }
    for (size_t k = 0; k < sizeof(ops2) / sizeof(ops2[0]); k++)
        if (c == ops2[k].a && i + 1 < sc->len && s[i + 1] == ops2[k].b) {
            sc->i = i + 2;
            int r = push_tok(sc, TK_OP, i, i + 2, sp, 0);
            if (r == 0)
                sc->lx->toks[sc->lx->ntoks - 1].op = (uint8_t)ops2[k].op;
            return r;
        }
    enum bsl_op op = op1((char)c);
    sc->i = i + 1;
    int r = push_tok(sc, op ? TK_OP : TK_UNKNOWN, i, i + 1, sp, 0);
    if (r == 0)
        sc->lx->toks[sc->lx->ntoks - 1].op = (uint8_t)op;
    return r;
}

int bsl_lex(const char *src, size_t len, struct bsl_lexed *out, struct bsl_err *err)
{
    memset(out, 0, sizeof(*out));
    if (len > BSL_FILE_MAX)
        return bsl_err_set(err, -EFBIG, "module of %zu bytes is over the %u-byte limit", len,
                           BSL_FILE_MAX);
    out->src = src;
    out->len = len;
    struct scan sc = {.lx = out, .s = src, .len = len, .err = err};
    size_t start = len >= 3 && !memcmp(src, "\xEF\xBB\xBF", 3) ? 3 : 0;
    bool line_blank = true;
    int r = new_line(&sc, start);
    sc.i = start;
    while (r == 0 && sc.i < len)
        r = scan_one(&sc, &line_blank);
    if (r == 0)
        r = push_tok(&sc, TK_EOF, len, len, pos_at(&sc, len), 0);
    if (r < 0) {
        bsl_lexed_free(out);
        return bsl_err_set(err, r, "out of memory lexing");
    }
    return 0;
}

void bsl_lexed_free(struct bsl_lexed *lx)
{
    free(lx->toks);
    free(lx->pps);
    free(lx->comments);
    free(lx->line_off);
    memset(lx, 0, sizeof(*lx));
}
