#include "parser.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const struct bsl_lexed *lx;
    struct bsl_tree *t;
    size_t p;
    int depth;
    int open_if, open_loop, open_try;
    bool in_method;
    bool abort; /* out of memory, or nested past BSL_DEPTH_MAX: stop */
    bool oom;
    uint32_t last_err_tok;
};

static const struct bsl_token *cur(const struct parser *P)
{
    return &P->lx->toks[P->p];
}
static const struct bsl_token *peek(const struct parser *P, size_t k)
{
    size_t i = P->p + k;
    return &P->lx->toks[i < P->lx->ntoks ? i : P->lx->ntoks - 1];
}
static bool at_eof(const struct parser *P)
{
    return cur(P)->type == TK_EOF;
}
static bool is_kw(const struct parser *P, enum bsl_kw k)
{
    return cur(P)->type == TK_KEYWORD && cur(P)->kw == k;
}
static bool is_op(const struct parser *P, enum bsl_op o)
{
    return cur(P)->type == TK_OP && cur(P)->op == o;
}
static void advance(struct parser *P)
{
    if (!at_eof(P))
        P->p++;
}

uint32_t bsl_child(const struct bsl_tree *t, uint32_t i, unsigned n)
{
    if (i == BSL_NONE)
        return BSL_NONE;
    uint32_t c = t->nodes[i].child;
    while (c != BSL_NONE && n--)
        c = t->nodes[c].next;
    return c;
}

bool bsl_is_statement(enum bsl_node_kind k)
{
    return k >= N_ASSIGN && k <= N_AWAITSTMT;
}

static uint32_t node(struct parser *P, enum bsl_node_kind kind, size_t tok)
{
    struct bsl_tree *t = P->t;
    if (t->nnodes >= UINT32_MAX - 1) {
        P->oom = P->abort = true;
        return BSL_NONE;
    }
    if (t->nnodes == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        struct bsl_node *q = realloc(t->nodes, nc * sizeof(*q));
        if (!q) {
            P->oom = P->abort = true;
            return BSL_NONE;
        }
        t->nodes = q;
        t->cap = nc;
    }
    struct bsl_node *n = &t->nodes[t->nnodes];
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->tok = n->first_tok = n->last_tok = (uint32_t)tok;
    n->child = n->next = n->last = n->aux = n->aux2 = BSL_NONE;
    return (uint32_t)t->nnodes++;
}

static void error_at(struct parser *P, size_t tok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void grow_height(struct parser *P, uint32_t parent, uint32_t child)
{
    struct bsl_node *pn = &P->t->nodes[parent];
    uint32_t h = P->t->nodes[child].height + 1;
    if (h <= pn->height)
        return;
    pn->height = h;
    if (h > BSL_TREE_HEIGHT_MAX && !P->abort) {
        error_at(P, P->p, "nested deeper than %d levels", BSL_TREE_HEIGHT_MAX);
        P->abort = true;
    }
}

static void add(struct parser *P, uint32_t parent, uint32_t child)
{
    if (parent == BSL_NONE || child == BSL_NONE)
        return;
    struct bsl_node *pn = &P->t->nodes[parent];
    if (pn->last == BSL_NONE)
        pn->child = child;
    else
        P->t->nodes[pn->last].next = child;
    pn->last = child;
    grow_height(P, parent, child);
}

/* The node spans up to the token before the current one. */
static uint32_t done(struct parser *P, uint32_t n)
{
    if (n != BSL_NONE && P->p > P->t->nodes[n].first_tok)
        P->t->nodes[n].last_tok = (uint32_t)(P->p - 1);
    return n;
}

static void error_at(struct parser *P, size_t tok, const char *fmt, ...)
{
    struct bsl_tree *t = P->t;
    if (tok == P->last_err_tok || t->nerrors >= BSL_MODULE_DIAGS_MAX)
        return;
    P->last_err_tok = (uint32_t)tok;
    if (t->nerrors == t->cap_errors) {
        size_t nc = t->cap_errors ? t->cap_errors * 2 : 16;
        struct bsl_syntax_error *q = realloc(t->errors, nc * sizeof(*q));
        if (!q) {
            P->oom = P->abort = true;
            return;
        }
        t->errors = q;
        t->cap_errors = nc;
    }
    struct bsl_syntax_error *e = &t->errors[t->nerrors++];
    e->tok = (uint32_t)tok;
    e->prev = BSL_NONE;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
}

/* The token as text for a message, at most 40 bytes. */
static void tok_text(const struct parser *P, const struct bsl_token *tk, char *buf, size_t size)
{
    if (tk->type == TK_EOF) {
        snprintf(buf, size, "end of file");
        return;
    }
    size_t n = tk->len > 40 ? 40 : tk->len;
    while (n < tk->len && n > 0 && ((unsigned char)P->lx->src[tk->off + n] & 0xC0) == 0x80)
        n--; /* whole code points */
    snprintf(buf, size, "'%.*s'", (int)n, P->lx->src + tk->off);
}

static void error_here(struct parser *P, const char *what)
{
    char t[64];
    size_t before = P->t->nerrors;
    tok_text(P, cur(P), t, sizeof(t));
    error_at(P, P->p, "%s, found %s", what, t);
    if (P->t->nerrors > before && P->p > 0 && P->lx->toks[P->p - 1].end.line < cur(P)->start.line)
        P->t->errors[P->t->nerrors - 1].prev = (uint32_t)(P->p - 1);
}

static bool enter(struct parser *P)
{
    if (++P->depth > BSL_DEPTH_MAX) {
        error_at(P, P->p, "nesting deeper than %d levels", BSL_DEPTH_MAX);
        P->abort = true;
    }
    return !P->abort;
}
static void leave(struct parser *P)
{
    P->depth--;
}

/* ---- block boundaries ---- */

static bool is_terminator(const struct parser *P)
{
    const struct bsl_token *t = cur(P);
    if (t->type == TK_EOF || t->type == TK_DIRECTIVE)
        return true;
    if (t->type != TK_KEYWORD)
        return false;
    switch (t->kw) {
    case KW_ENDPROCEDURE:
    case KW_ENDFUNCTION:
    case KW_ENDIF:
    case KW_ELSIF:
    case KW_ELSE:
    case KW_ENDDO:
    case KW_EXCEPT:
    case KW_ENDTRY:
    case KW_PROCEDURE:
    case KW_FUNCTION:
        return true;
    case KW_ASYNC:
        return peek(P, 1)->type == TK_KEYWORD &&
               (peek(P, 1)->kw == KW_PROCEDURE || peek(P, 1)->kw == KW_FUNCTION);
    default:
        return false;
    }
}

/* Whether some open construct (or the module) ends at this terminator. */
static bool terminator_expected(const struct parser *P)
{
    const struct bsl_token *t = cur(P);
    if (t->type != TK_KEYWORD)
        return true;
    switch (t->kw) {
    case KW_ENDIF:
    case KW_ELSIF:
    case KW_ELSE:
        return P->open_if > 0;
    case KW_ENDDO:
        return P->open_loop > 0;
    case KW_EXCEPT:
    case KW_ENDTRY:
        return P->open_try > 0;
    case KW_ENDPROCEDURE:
    case KW_ENDFUNCTION:
        return P->in_method;
    default:
        return true;
    }
}

static bool starts_statement(const struct bsl_token *t)
{
    if (t->type != TK_KEYWORD)
        return false;
    switch (t->kw) {
    case KW_IF:
    case KW_WHILE:
    case KW_FOR:
    case KW_TRY:
    case KW_RETURN:
    case KW_BREAK:
    case KW_CONTINUE:
    case KW_RAISE:
    case KW_GOTO:
    case KW_VAR:
    case KW_EXECUTE:
    case KW_ADDHANDLER:
    case KW_REMOVEHANDLER:
        return true;
    default:
        return false;
    }
}

/* After an error: skip to past the next ;, or to a statement keyword starting a line, or
 * to a block boundary. */
static void sync(struct parser *P)
{
    if (!is_terminator(P))
        advance(P);
    while (!at_eof(P) && !P->abort) {
        if (is_op(P, OP_SEMI)) {
            advance(P);
            return;
        }
        if (is_terminator(P) || ((cur(P)->flags & BSL_TF_LINE_START) && starts_statement(cur(P))))
            return;
        advance(P);
    }
}

/* ---- expressions ---- */

static uint32_t expr(struct parser *P);

static uint32_t args(struct parser *P)
{
    uint32_t a = node(P, N_ARGS, P->p);
    advance(P); /* ( */
    if (is_op(P, OP_RPAREN)) {
        advance(P);
        return done(P, a);
    }
    for (;;) {
        if (P->abort)
            return a;
        if (is_op(P, OP_COMMA) || is_op(P, OP_RPAREN))
            add(P, a, node(P, N_NOARG, P->p));
        else
            add(P, a, expr(P));
        if (is_op(P, OP_COMMA)) {
            advance(P);
            continue;
        }
        if (is_op(P, OP_RPAREN))
            advance(P);
        else
            error_here(P, "expected ',' or ')'");
        return done(P, a);
    }
}

static bool member_name(const struct bsl_token *t)
{
    return t->type == TK_IDENT || t->type == TK_KEYWORD;
}

static uint32_t primary(struct parser *P)
{
    const struct bsl_token *t = cur(P);
    size_t at = P->p;
    uint32_t n;
    switch (t->type) {
    case TK_NUMBER:
    case TK_DATE:
        if (t->flags & BSL_TF_UNTERMINATED)
            error_at(P, at, "the date literal has no closing '");
        advance(P);
        return done(P, node(P, N_LITERAL, at));
    case TK_STRING:
        while (cur(P)->type == TK_STRING) { /* "a" "b" is one string */
            if (cur(P)->flags & BSL_TF_UNTERMINATED)
                error_at(P, P->p, "the string has no closing \" (a next line goes on with |)");
            advance(P);
        }
        return done(P, node(P, N_LITERAL, at));
    case TK_IDENT:
        advance(P);
        return done(P, node(P, N_IDENT, at));
    case TK_OP:
        if (t->op == OP_LPAREN) {
            n = node(P, N_PAREN, at);
            advance(P);
            add(P, n, expr(P));
            if (is_op(P, OP_RPAREN))
                advance(P);
            else
                error_here(P, "expected ')'");
            return done(P, n);
        }
        if (t->op == OP_QUESTION) {
            n = node(P, N_TERNARY, at);
            advance(P);
            if (!is_op(P, OP_LPAREN)) {
                error_here(P, "expected '(' after '?'");
                return done(P, n);
            }
            advance(P);
            for (int k = 0; k < 3 && !P->abort; k++) {
                add(P, n, expr(P));
                if (k < 2 && !is_op(P, OP_COMMA)) {
                    error_here(P, "expected ',' in ?(condition, then, else)");
                    return done(P, n);
                }
                advance(P);
            }
            if (P->p > 0 &&
                !(P->lx->toks[P->p - 1].type == TK_OP && P->lx->toks[P->p - 1].op == OP_RPAREN))
                error_at(P, P->p - 1, "expected ')' to end ?(...)");
            return done(P, n);
        }
        break;
    case TK_KEYWORD:
        switch (t->kw) {
        case KW_TRUE:
        case KW_FALSE:
        case KW_UNDEFINED:
        case KW_NULL:
            advance(P);
            return done(P, node(P, N_LITERAL, at));
        case KW_NEW:
            advance(P);
            if (member_name(cur(P))) {
                n = node(P, N_NEW, P->p);
                advance(P);
            } else {
                n = node(P, N_NEW, at);
            }
            if (n != BSL_NONE)
                P->t->nodes[n].first_tok = (uint32_t)at;
            if (is_op(P, OP_LPAREN))
                add(P, n, args(P));
            else if (P->t->nodes[n].tok == at)
                error_here(P, "expected a type name or '(' after Новый");
            return done(P, n);
        case KW_AWAIT:
            n = node(P, N_UNARY, at);
            advance(P);
            add(P, n, expr(P));
            return done(P, n);
        default:
            break;
        }
        break;
    default:
        break;
    }
    error_here(P, "expected an expression");
    n = node(P, N_ERROR, at);
    if (!is_terminator(P) && !is_op(P, OP_SEMI) && !is_op(P, OP_RPAREN) && !is_op(P, OP_COMMA))
        advance(P);
    return done(P, n);
}

static uint32_t postfix(struct parser *P)
{
    uint32_t n = primary(P);
    while (!P->abort && n != BSL_NONE) {
        size_t at = P->p;
        uint32_t m;
        if (is_op(P, OP_DOT)) {
            advance(P);
            if (!member_name(cur(P))) {
                error_here(P, "expected a name after '.'");
                return n;
            }
            m = node(P, N_MEMBER, P->p);
            advance(P);
        } else if (is_op(P, OP_LPAREN)) {
            m = node(P, N_CALL, at);
            if (m == BSL_NONE)
                return n;
            add(P, m, n);
            add(P, m, args(P));
            P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
            n = done(P, m);
            continue;
        } else if (is_op(P, OP_LBRACK)) {
            m = node(P, N_INDEX, at);
            advance(P);
            if (m == BSL_NONE)
                return n;
            add(P, m, n);
            add(P, m, expr(P));
            if (is_op(P, OP_RBRACK))
                advance(P);
            else
                error_here(P, "expected ']'");
            P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
            n = done(P, m);
            continue;
        } else {
            return n;
        }
        if (m == BSL_NONE)
            return n;
        /* a member: the object is its child */
        P->t->nodes[m].child = P->t->nodes[m].last = n;
        grow_height(P, m, n);
        P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
        n = done(P, m);
    }
    return n;
}

static uint32_t binary(struct parser *P, uint32_t left, size_t op_tok, uint32_t right)
{
    uint32_t n = node(P, N_BINARY, op_tok);
    if (n == BSL_NONE)
        return left;
    add(P, n, left);
    add(P, n, right);
    if (left != BSL_NONE)
        P->t->nodes[n].first_tok = P->t->nodes[left].first_tok;
    return done(P, n);
}

static uint32_t unary(struct parser *P)
{
    if (is_op(P, OP_MINUS) || is_op(P, OP_PLUS)) {
        uint32_t n = node(P, N_UNARY, P->p);
        advance(P);
        if (!enter(P))
            return n;
        add(P, n, unary(P));
        leave(P);
        return done(P, n);
    }
    return postfix(P);
}

static uint32_t mul(struct parser *P)
{
    uint32_t l = unary(P);
    while (!P->abort && (is_op(P, OP_STAR) || is_op(P, OP_SLASH) || is_op(P, OP_PERCENT))) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, unary(P));
    }
    return l;
}

static uint32_t addsub(struct parser *P)
{
    uint32_t l = mul(P);
    while (!P->abort && (is_op(P, OP_PLUS) || is_op(P, OP_MINUS))) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, mul(P));
    }
    return l;
}

static bool is_cmp(const struct parser *P)
{
    const struct bsl_token *t = cur(P);
    return t->type == TK_OP && t->op >= OP_EQ && t->op <= OP_GE;
}

static uint32_t cmp(struct parser *P)
{
    uint32_t l = addsub(P);
    while (!P->abort && is_cmp(P)) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, addsub(P));
    }
    return l;
}

static uint32_t not_expr(struct parser *P)
{
    if (is_kw(P, KW_NOT)) {
        uint32_t n = node(P, N_UNARY, P->p);
        advance(P);
        if (!enter(P))
            return n;
        add(P, n, not_expr(P));
        leave(P);
        return done(P, n);
    }
    return cmp(P);
}

static uint32_t and_expr(struct parser *P)
{
    uint32_t l = not_expr(P);
    while (!P->abort && is_kw(P, KW_AND)) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, not_expr(P));
    }
    return l;
}

static uint32_t expr(struct parser *P)
{
    if (!enter(P))
        return BSL_NONE;
    uint32_t l = and_expr(P);
    while (!P->abort && is_kw(P, KW_OR)) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, and_expr(P));
    }
    leave(P);
    return l;
}

/* ---- statements ---- */

static uint32_t block(struct parser *P);

static const char *kw_pair(enum bsl_kw k, char *buf, size_t size)
{
    snprintf(buf, size, "%s (%s)", bsl_kw_ru(k), bsl_kw_en(k));
    return buf;
}

/* The end keyword of a construct: consumed when there, else an error (the token found is
 * an enclosing construct's, so it stays). */
static void expect_end(struct parser *P, enum bsl_kw k, size_t open)
{
    if (is_kw(P, k)) {
        advance(P);
        return;
    }
    char b[96], t[64];
    tok_text(P, cur(P), t, sizeof(t));
    /* at the token that closed the block: where the construct was left open */
    const struct bsl_token *o = &P->lx->toks[open];
    error_at(P, P->p, "expected %s to close the %.*s on line %u, found %s",
             kw_pair(k, b, sizeof(b)), (int)(o->len > 40 ? 40 : o->len), P->lx->src + o->off,
             o->start.line, t);
    /* and where it was opened, which is where a reader looks for the fault */
    error_at(P, open, "this %.*s is not closed by %s", (int)(o->len > 40 ? 40 : o->len),
             P->lx->src + o->off, kw_pair(k, b, sizeof(b)));
}

/* A keyword due on the construct's line (Тогда, Цикл, Из, По): a miss is reported from the
 * end of the last good token. */
static void expect_kw(struct parser *P, enum bsl_kw k)
{
    if (is_kw(P, k)) {
        advance(P);
        return;
    }
    char b[96], w[128];
    snprintf(w, sizeof(w), "expected %s", kw_pair(k, b, sizeof(b)));
    error_here(P, w);
}

static uint32_t if_stmt(struct parser *P)
{
    size_t open = P->p;
    uint32_t n = node(P, N_IF, P->p);
    P->open_if++;
    bool first = true;
    while (!P->abort && (first ? is_kw(P, KW_IF) : is_kw(P, KW_ELSIF))) {
        uint32_t br = node(P, N_BRANCH, P->p);
        advance(P);
        add(P, br, expr(P));
        expect_kw(P, KW_THEN);
        add(P, br, block(P));
        add(P, n, done(P, br));
        first = false;
    }
    if (is_kw(P, KW_ELSE)) {
        uint32_t e = node(P, N_ELSE, P->p);
        advance(P);
        add(P, e, block(P));
        add(P, n, done(P, e));
    }
    P->open_if--;
    expect_end(P, KW_ENDIF, open);
    return done(P, n);
}

static uint32_t ident_node(struct parser *P, const char *what)
{
    if (cur(P)->type != TK_IDENT) {
        error_here(P, what);
        return node(P, N_ERROR, P->p);
    }
    uint32_t v = node(P, N_IDENT, P->p);
    advance(P);
    return v;
}

static uint32_t loop_body(struct parser *P, uint32_t n, size_t open)
{
    expect_kw(P, KW_DO);
    P->open_loop++;
    add(P, n, block(P));
    P->open_loop--;
    expect_end(P, KW_ENDDO, open);
    return done(P, n);
}

static uint32_t for_stmt(struct parser *P)
{
    size_t at = P->p;
    advance(P);
    if (is_kw(P, KW_EACH)) {
        uint32_t n = node(P, N_FOREACH, at);
        advance(P);
        add(P, n, ident_node(P, "expected the loop variable"));
        expect_kw(P, KW_IN);
        add(P, n, expr(P));
        return loop_body(P, n, at);
    }
    uint32_t n = node(P, N_FOR, at);
    add(P, n, ident_node(P, "expected the loop variable"));
    if (is_op(P, OP_EQ))
        advance(P);
    else
        error_here(P, "expected '='");
    add(P, n, expr(P));
    expect_kw(P, KW_TO);
    add(P, n, expr(P));
    return loop_body(P, n, at);
}

static uint32_t try_stmt(struct parser *P)
{
    size_t open = P->p;
    uint32_t n = node(P, N_TRY, P->p);
    advance(P);
    P->open_try++;
    add(P, n, block(P));
    if (is_kw(P, KW_EXCEPT)) {
        uint32_t e = node(P, N_EXCEPT, P->p);
        advance(P);
        add(P, e, block(P));
        add(P, n, done(P, e));
    } else {
        expect_end(P, KW_EXCEPT, open);
    }
    P->open_try--;
    expect_end(P, KW_ENDTRY, open);
    return done(P, n);
}

/* Whether a statement ends here without a value: ; or its block's end. */
static bool no_value(const struct parser *P)
{
    return is_op(P, OP_SEMI) || is_terminator(P);
}

static uint32_t var_decl(struct parser *P, bool module)
{
    uint32_t n = node(P, N_VARDECL, P->p);
    advance(P);
    for (;;) {
        uint32_t v = ident_node(P, "expected a variable name");
        add(P, n, v);
        if (is_kw(P, KW_EXPORT)) {
            if (!module)
                error_here(P, "a local variable cannot be exported");
            else if (v != BSL_NONE)
                P->t->nodes[v].flags |= NF_EXPORT;
            advance(P);
        }
        if (!is_op(P, OP_COMMA) || P->abort)
            break;
        advance(P);
    }
    return done(P, n);
}

static uint32_t simple_stmt(struct parser *P)
{
    size_t at = P->p;
    uint32_t target = postfix(P);
    if (is_op(P, OP_EQ)) {
        uint32_t n = node(P, N_ASSIGN, at);
        enum bsl_node_kind k = target == BSL_NONE ? N_ERROR : P->t->nodes[target].kind;
        if (k != N_IDENT && k != N_MEMBER && k != N_INDEX && k != N_ERROR)
            error_at(P, at, "this cannot be assigned to");
        advance(P);
        add(P, n, target);
        add(P, n, expr(P));
        return done(P, n);
    }
    uint32_t n = node(P, N_CALLSTMT, at);
    add(P, n, target);
    if (target != BSL_NONE && P->t->nodes[target].kind != N_CALL &&
        P->t->nodes[target].kind != N_ERROR)
        error_here(P, "expected '=' or a call");
    return done(P, n);
}

static uint32_t statement(struct parser *P)
{
    const struct bsl_token *t = cur(P);
    size_t at = P->p;
    uint32_t n;
    if (t->type == TK_OP && t->op == OP_SEMI) {
        n = node(P, N_EMPTY, at);
        advance(P);
        return done(P, n);
    }
    if (t->type == TK_LABEL && peek(P, 1)->type == TK_OP && peek(P, 1)->op == OP_COLON) {
        n = node(P, N_LABEL, at);
        advance(P);
        advance(P);
        return done(P, n);
    }
    if (!enter(P))
        return BSL_NONE;
    size_t errors = P->t->nerrors;
    if (t->type == TK_KEYWORD) {
        switch (t->kw) {
        case KW_IF:
            n = if_stmt(P);
            break;
        case KW_WHILE:
            n = node(P, N_WHILE, at);
            advance(P);
            add(P, n, expr(P));
            n = loop_body(P, n, at);
            break;
        case KW_FOR:
            n = for_stmt(P);
            break;
        case KW_NEW:
            n = simple_stmt(P);
            break; /* Новый Т().Метод(); */
        case KW_TRY:
            n = try_stmt(P);
            break;
        case KW_VAR:
            n = var_decl(P, false);
            break;
        case KW_RETURN:
        case KW_RAISE:
        case KW_EXECUTE:
        case KW_AWAIT:
            n = node(P,
                     t->kw == KW_RETURN    ? N_RETURN
                     : t->kw == KW_RAISE   ? N_RAISE
                     : t->kw == KW_EXECUTE ? N_EXECUTE
                                           : N_AWAITSTMT,
                     at);
            advance(P);
            if (P->t->nodes[n].kind == N_RAISE && is_op(P, OP_LPAREN))
                add(P, n, args(P));
            else if (!no_value(P))
                add(P, n, expr(P));
            else if (P->t->nodes[n].kind == N_EXECUTE || P->t->nodes[n].kind == N_AWAITSTMT)
                error_here(P, "expected an expression");
            n = done(P, n);
            break;
        case KW_BREAK:
        case KW_CONTINUE:
            n = node(P, t->kw == KW_BREAK ? N_BREAK : N_CONTINUE, at);
            if (!P->open_loop)
                error_at(P, at, "%s outside a loop",
                         t->kw == KW_BREAK ? "Прервать (Break)" : "Продолжить (Continue)");
            advance(P);
            n = done(P, n);
            break;
        case KW_GOTO:
            n = node(P, N_GOTO, at);
            advance(P);
            if (cur(P)->type == TK_LABEL) {
                P->t->nodes[n].tok = (uint32_t)P->p;
                advance(P);
            } else {
                error_here(P, "expected a ~label");
            }
            n = done(P, n);
            break;
        case KW_ADDHANDLER:
        case KW_REMOVEHANDLER:
            n = node(P, N_HANDLER, at);
            advance(P);
            add(P, n, expr(P));
            if (is_op(P, OP_COMMA)) {
                advance(P);
                add(P, n, expr(P));
            } else {
                error_here(P, "expected ','");
            }
            n = done(P, n);
            break;
        default:
            error_here(P, "expected a statement");
            n = node(P, N_ERROR, at);
            sync(P);
            leave(P);
            return done(P, n);
        }
    } else if (t->type == TK_IDENT || (t->type == TK_OP && t->op == OP_LPAREN)) {
        n = simple_stmt(P);
    } else {
        error_here(P, "expected a statement");
        n = node(P, N_ERROR, at);
        sync(P);
        leave(P);
        return done(P, n);
    }
    leave(P);
    if (P->abort)
        return n;
    /* the statement's end */
    if (is_op(P, OP_SEMI)) {
        advance(P);
        return done(P, n);
    }
    if (is_terminator(P)) {
        if (n != BSL_NONE && P->t->nerrors == errors) /* not after a syntax error */
            P->t->nodes[n].flags |= NF_NO_SEMI;
        return n;
    }
    if (P->t->nerrors == errors)
        error_here(P, "expected ';'");
    sync(P);
    return n;
}

static uint32_t block(struct parser *P)
{
    uint32_t b = node(P, N_BLOCK, P->p);
    if (!enter(P))
        return b;
    while (!P->abort && !at_eof(P)) {
        if (is_terminator(P)) {
            if (terminator_expected(P))
                break;
            char tx[64], w[128];
            tok_text(P, cur(P), tx, sizeof(tx));
            snprintf(w, sizeof(w), "unexpected %s", tx);
            error_at(P, P->p, "%s", w);
            advance(P);
            continue;
        }
        size_t before = P->p;
        add(P, b, statement(P));
        if (P->p == before) /* nothing consumed: never loop on it */
            advance(P);
    }
    leave(P);
    if (P->t->nodes[b].last != BSL_NONE)
        P->t->nodes[b].last_tok = P->t->nodes[P->t->nodes[b].last].last_tok;
    else
        P->t->nodes[b].last_tok = P->p ? (uint32_t)(P->p - 1) : 0;
    return b;
}

/* ---- methods and the module ---- */

/* A directive or annotation, with its (arguments) if any. */
static void skip_directive(struct parser *P)
{
    advance(P);
    if (!is_op(P, OP_LPAREN))
        return;
    int depth = 0;
    while (!at_eof(P)) {
        if (is_op(P, OP_LPAREN))
            depth++;
        else if (is_op(P, OP_RPAREN) && --depth == 0) {
            advance(P);
            return;
        }
        advance(P);
    }
}

static uint32_t params(struct parser *P)
{
    uint32_t ps = node(P, N_PARAMS, P->p);
    if (!is_op(P, OP_LPAREN)) {
        error_here(P, "expected '('");
        return ps;
    }
    advance(P);
    while (!P->abort && !at_eof(P) && !is_op(P, OP_RPAREN)) {
        while (cur(P)->type == TK_DIRECTIVE)
            skip_directive(P);
        bool val = false;
        if (is_kw(P, KW_VAL)) {
            val = true;
            advance(P);
        }
        if (cur(P)->type != TK_IDENT) {
            error_here(P, "expected a parameter name");
            break;
        }
        uint32_t p = node(P, N_PARAM, P->p);
        if (p != BSL_NONE && val)
            P->t->nodes[p].flags |= NF_VAL;
        advance(P);
        if (is_op(P, OP_EQ)) {
            advance(P);
            add(P, p, unary(P));
        }
        add(P, ps, done(P, p));
        if (is_op(P, OP_COMMA))
            advance(P);
        else if (!is_op(P, OP_RPAREN)) {
            error_here(P, "expected ',' or ')'");
            break;
        }
    }
    if (is_op(P, OP_RPAREN))
        advance(P);
    else /* skip the rest of the signature's line */
        while (!at_eof(P) && !(cur(P)->flags & BSL_TF_LINE_START) && !is_kw(P, KW_EXPORT))
            advance(P);
    return done(P, ps);
}

static uint32_t method(struct parser *P, uint32_t first_directive)
{
    size_t at = P->p;
    uint8_t flags = 0;
    if (is_kw(P, KW_ASYNC)) {
        flags |= NF_ASYNC;
        advance(P);
    }
    bool func = is_kw(P, KW_FUNCTION);
    if (func)
        flags |= NF_FUNCTION;
    advance(P);
    uint32_t m;
    if (cur(P)->type == TK_IDENT) {
        m = node(P, N_METHOD, P->p);
        advance(P);
    } else {
        error_here(P, "expected the method's name");
        m = node(P, N_METHOD, P->p);
    }
    if (m == BSL_NONE)
        return m;
    P->t->nodes[m].first_tok = first_directive != BSL_NONE ? first_directive : (uint32_t)at;
    P->t->nodes[m].aux2 = first_directive;
    add(P, m, params(P));
    if (is_kw(P, KW_EXPORT)) {
        flags |= NF_EXPORT;
        advance(P);
    }
    P->t->nodes[m].flags = flags;
    P->in_method = true;
    P->open_if = P->open_loop = P->open_try = 0;
    add(P, m, block(P));
    P->in_method = false;
    enum bsl_kw end = func ? KW_ENDFUNCTION : KW_ENDPROCEDURE;
    if (is_kw(P, KW_ENDPROCEDURE) || is_kw(P, KW_ENDFUNCTION)) {
        if (!is_kw(P, end))
            expect_end(P, end, at);
        P->t->nodes[m].aux = (uint32_t)P->p;
        advance(P);
    } else {
        expect_end(P, end, at);
    }
    return done(P, m);
}

int bsl_parse(const struct bsl_lexed *lx, struct bsl_tree *tree, struct bsl_err *err)
{
    memset(tree, 0, sizeof(*tree));
    tree->lx = lx;
    struct parser P = {.lx = lx, .t = tree, .last_err_tok = BSL_NONE};
    uint32_t root = node(&P, N_MODULE, 0);
    tree->root = root;
    uint32_t first_directive = BSL_NONE;
    while (!P.abort && !at_eof(&P)) {
        const struct bsl_token *t = cur(&P);
        size_t before = P.p;
        if (t->type == TK_DIRECTIVE) {
            if (first_directive == BSL_NONE)
                first_directive = (uint32_t)P.p;
            skip_directive(&P);
            continue;
        }
        if (t->type == TK_KEYWORD && (t->kw == KW_PROCEDURE || t->kw == KW_FUNCTION ||
                                      (t->kw == KW_ASYNC && is_terminator(&P)))) {
            add(&P, root, method(&P, first_directive));
            first_directive = BSL_NONE;
        } else if (t->type == TK_KEYWORD && t->kw == KW_VAR) {
            uint32_t v = var_decl(&P, true);
            add(&P, root, v);
            first_directive = BSL_NONE;
            if (is_op(&P, OP_SEMI))
                advance(&P);
            else
                error_here(&P, "expected ';'");
        } else if (is_terminator(&P)) {
            char tx[64];
            tok_text(&P, t, tx, sizeof(tx));
            error_at(&P, P.p, "unexpected %s", tx);
            advance(&P);
        } else {
            first_directive = BSL_NONE;
            add(&P, root, statement(&P));
        }
        if (P.p == before)
            advance(&P);
    }
    if (P.oom) {
        bsl_tree_free(tree);
        return bsl_err_set(err, -ENOMEM, "out of memory parsing");
    }
    if (root != BSL_NONE)
        done(&P, root);
    return 0;
}

void bsl_tree_free(struct bsl_tree *t)
{
    free(t->nodes);
    free(t->errors);
    memset(t, 0, sizeof(*t));
}
