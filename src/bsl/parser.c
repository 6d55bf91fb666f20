/* Import circle with expr.c (allowed inside a folder, docs/architecture.md#layering): one
 * recursive-descent parser in two files for size; statements parse expressions (expr.c), which
 * use this file's cursor, node and error helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_int.h"

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

uint32_t bp_node(struct parser *P, enum bsl_node_kind kind, size_t tok)
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

static void grow_height(struct parser *P, uint32_t parent, uint32_t child)
{
    struct bsl_node *pn = &P->t->nodes[parent];
    uint32_t h = P->t->nodes[child].height + 1;
    if (h <= pn->height)
        return;
    pn->height = h;
    if (h > BSL_TREE_HEIGHT_MAX && !P->abort) {
        bp_error_at(P, P->p, "nested deeper than %d levels", BSL_TREE_HEIGHT_MAX);
        P->abort = true;
    }
}

void bp_add(struct parser *P, uint32_t parent, uint32_t child)
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

uint32_t bp_done(struct parser *P, uint32_t n)
{
    if (n != BSL_NONE && P->p > P->t->nodes[n].first_tok)
        P->t->nodes[n].last_tok = (uint32_t)(P->p - 1);
    return n;
}

void bp_error_at(struct parser *P, size_t tok, const char *fmt, ...)
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

void bp_tok_text(const struct parser *P, const struct bsl_token *tk, char *buf, size_t size)
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

void bp_error_here(struct parser *P, const char *what)
{
    char t[64];
    size_t before = P->t->nerrors;
    bp_tok_text(P, cur(P), t, sizeof(t));
    bp_error_at(P, P->p, "%s, found %s", what, t);
    if (P->t->nerrors > before && P->p > 0 && P->lx->toks[P->p - 1].end.line < cur(P)->start.line)
        P->t->errors[P->t->nerrors - 1].prev = (uint32_t)(P->p - 1);
}

bool bp_enter(struct parser *P)
{
    if (++P->depth > BSL_DEPTH_MAX) {
        bp_error_at(P, P->p, "nesting deeper than %d levels", BSL_DEPTH_MAX);
        P->abort = true;
    }
    return !P->abort;
}
void bp_leave(struct parser *P)
{
    P->depth--;
}

/* ---- block boundaries ---- */

bool bp_is_terminator(const struct parser *P)
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
    if (!bp_is_terminator(P))
        advance(P);
    while (!at_eof(P) && !P->abort) {
        if (is_op(P, OP_SEMI)) {
            advance(P);
            return;
        }
        if (bp_is_terminator(P) ||
            ((cur(P)->flags & BSL_TF_LINE_START) && starts_statement(cur(P))))
            return;
        advance(P);
    }
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
    bp_tok_text(P, cur(P), t, sizeof(t));
    /* at the token that closed the block: where the construct was left open */
    const struct bsl_token *o = &P->lx->toks[open];
    bp_error_at(P, P->p, "expected %s to close the %.*s on line %u, found %s",
                kw_pair(k, b, sizeof(b)), (int)(o->len > 40 ? 40 : o->len), P->lx->src + o->off,
                o->start.line, t);
    /* and where it was opened, which is where a reader looks for the fault */
    bp_error_at(P, open, "this %.*s is not closed by %s", (int)(o->len > 40 ? 40 : o->len),
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
    bp_error_here(P, w);
}

static uint32_t if_stmt(struct parser *P)
{
    size_t open = P->p;
    uint32_t n = bp_node(P, N_IF, P->p);
    P->open_if++;
    bool first = true;
    while (!P->abort && (first ? is_kw(P, KW_IF) : is_kw(P, KW_ELSIF))) {
        uint32_t br = bp_node(P, N_BRANCH, P->p);
        advance(P);
        bp_add(P, br, bp_expr(P));
        expect_kw(P, KW_THEN);
        bp_add(P, br, block(P));
        bp_add(P, n, bp_done(P, br));
        first = false;
    }
    if (is_kw(P, KW_ELSE)) {
        uint32_t e = bp_node(P, N_ELSE, P->p);
        advance(P);
        bp_add(P, e, block(P));
        bp_add(P, n, bp_done(P, e));
    }
    P->open_if--;
    expect_end(P, KW_ENDIF, open);
    return bp_done(P, n);
}

static uint32_t ident_node(struct parser *P, const char *what)
{
    if (cur(P)->type != TK_IDENT) {
        bp_error_here(P, what);
        return bp_node(P, N_ERROR, P->p);
    }
    uint32_t v = bp_node(P, N_IDENT, P->p);
    advance(P);
    return v;
}

static uint32_t loop_body(struct parser *P, uint32_t n, size_t open)
{
    expect_kw(P, KW_DO);
    P->open_loop++;
    bp_add(P, n, block(P));
    P->open_loop--;
    expect_end(P, KW_ENDDO, open);
    return bp_done(P, n);
}

static uint32_t for_stmt(struct parser *P)
{
    size_t at = P->p;
    advance(P);
    if (is_kw(P, KW_EACH)) {
        uint32_t n = bp_node(P, N_FOREACH, at);
        advance(P);
        bp_add(P, n, ident_node(P, "expected the loop variable"));
        expect_kw(P, KW_IN);
        bp_add(P, n, bp_expr(P));
        return loop_body(P, n, at);
    }
    uint32_t n = bp_node(P, N_FOR, at);
    bp_add(P, n, ident_node(P, "expected the loop variable"));
    if (is_op(P, OP_EQ))
        advance(P);
    else
        bp_error_here(P, "expected '='");
    bp_add(P, n, bp_expr(P));
    expect_kw(P, KW_TO);
    bp_add(P, n, bp_expr(P));
    return loop_body(P, n, at);
}

static uint32_t try_stmt(struct parser *P)
{
    size_t open = P->p;
    uint32_t n = bp_node(P, N_TRY, P->p);
    advance(P);
    P->open_try++;
    bp_add(P, n, block(P));
    if (is_kw(P, KW_EXCEPT)) {
        uint32_t e = bp_node(P, N_EXCEPT, P->p);
        advance(P);
        bp_add(P, e, block(P));
        bp_add(P, n, bp_done(P, e));
    } else {
        expect_end(P, KW_EXCEPT, open);
    }
    P->open_try--;
    expect_end(P, KW_ENDTRY, open);
    return bp_done(P, n);
}

/* Whether a statement ends here without a value: ; or its block's end. */
static bool no_value(const struct parser *P)
{
    return is_op(P, OP_SEMI) || bp_is_terminator(P);
}

static uint32_t var_decl(struct parser *P, bool module)
{
    uint32_t n = bp_node(P, N_VARDECL, P->p);
    advance(P);
    for (;;) {
        uint32_t v = ident_node(P, "expected a variable name");
        bp_add(P, n, v);
        while (is_op(P, OP_LBRACK) && !P->abort) { /* Перем Массив[10]; a fixed array */
            advance(P);
            bp_expr(P);
            while (is_op(P, OP_COMMA) && !P->abort) {
                advance(P);
                bp_expr(P);
            }
            if (is_op(P, OP_RBRACK))
                advance(P);
            else
                bp_error_here(P, "expected ']'");
        }
        if (is_kw(P, KW_EXPORT)) {
            if (!module)
                bp_error_here(P, "a local variable cannot be exported");
            else if (v != BSL_NONE)
                P->t->nodes[v].flags |= NF_EXPORT;
            advance(P);
        }
        if (!is_op(P, OP_COMMA) || P->abort)
            break;
        advance(P);
    }
    return bp_done(P, n);
}

static uint32_t simple_stmt(struct parser *P)
{
    size_t at = P->p;
    uint32_t target = bp_postfix(P);
    if (is_op(P, OP_EQ)) {
        uint32_t n = bp_node(P, N_ASSIGN, at);
        enum bsl_node_kind k = target == BSL_NONE ? N_ERROR : P->t->nodes[target].kind;
        if (k != N_IDENT && k != N_MEMBER && k != N_INDEX && k != N_ERROR)
            bp_error_at(P, at, "this cannot be assigned to");
        advance(P);
        bp_add(P, n, target);
        bp_add(P, n, bp_expr(P));
        return bp_done(P, n);
    }
    uint32_t n = bp_node(P, N_CALLSTMT, at);
    bp_add(P, n, target);
    if (target != BSL_NONE && P->t->nodes[target].kind != N_CALL &&
        P->t->nodes[target].kind != N_ERROR)
        bp_error_here(P, "expected '=' or a call");
    return bp_done(P, n);
}

static uint32_t statement(struct parser *P)
{
    const struct bsl_token *t = cur(P);
    size_t at = P->p;
    uint32_t n;
    if (t->type == TK_OP && t->op == OP_SEMI) {
        n = bp_node(P, N_EMPTY, at);
        advance(P);
        return bp_done(P, n);
    }
    if (t->type == TK_LABEL && peek(P, 1)->type == TK_OP && peek(P, 1)->op == OP_COLON) {
        n = bp_node(P, N_LABEL, at);
        advance(P);
        advance(P);
        return bp_done(P, n);
    }
    if (!bp_enter(P))
        return BSL_NONE;
    size_t errors = P->t->nerrors;
    if (t->type == TK_KEYWORD) {
        switch (t->kw) {
        case KW_IF:
            n = if_stmt(P);
            break;
        case KW_WHILE:
            n = bp_node(P, N_WHILE, at);
            advance(P);
            bp_add(P, n, bp_expr(P));
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
        case KW_EXECUTE:
            if (peek(P, 1)->type == TK_OP && peek(P, 1)->op == OP_LPAREN) {
                n = simple_stmt(P); /* Выполнить(код), or a OneScript method's call */
                break;
            }
            /* fall through */
        case KW_RETURN:
        case KW_RAISE:
        case KW_AWAIT:
            n = bp_node(P,
                        t->kw == KW_RETURN    ? N_RETURN
                        : t->kw == KW_RAISE   ? N_RAISE
                        : t->kw == KW_EXECUTE ? N_EXECUTE
                                              : N_AWAITSTMT,
                        at);
            advance(P);
            if (P->t->nodes[n].kind == N_RAISE && is_op(P, OP_LPAREN))
                bp_add(P, n, bp_args(P));
            else if (!no_value(P))
                bp_add(P, n, bp_expr(P));
            else if (P->t->nodes[n].kind == N_EXECUTE || P->t->nodes[n].kind == N_AWAITSTMT)
                bp_error_here(P, "expected an expression");
            n = bp_done(P, n);
            break;
        case KW_BREAK:
        case KW_CONTINUE:
            n = bp_node(P, t->kw == KW_BREAK ? N_BREAK : N_CONTINUE, at);
            if (!P->open_loop)
                bp_error_at(P, at, "%s outside a loop",
                            t->kw == KW_BREAK ? "Прервать (Break)" : "Продолжить (Continue)");
            advance(P);
            n = bp_done(P, n);
            break;
        case KW_GOTO:
            n = bp_node(P, N_GOTO, at);
            advance(P);
            if (cur(P)->type == TK_LABEL) {
                P->t->nodes[n].tok = (uint32_t)P->p;
                advance(P);
            } else {
                bp_error_here(P, "expected a ~label");
            }
            n = bp_done(P, n);
            break;
        case KW_ADDHANDLER:
        case KW_REMOVEHANDLER:
            n = bp_node(P, N_HANDLER, at);
            advance(P);
            bp_add(P, n, bp_expr(P));
            if (is_op(P, OP_COMMA)) {
                advance(P);
                bp_add(P, n, bp_expr(P));
            } else {
                bp_error_here(P, "expected ','");
            }
            n = bp_done(P, n);
            break;
        default:
            bp_error_here(P, "expected a statement");
            n = bp_node(P, N_ERROR, at);
            sync(P);
            bp_leave(P);
            return bp_done(P, n);
        }
    } else if (t->type == TK_IDENT || (t->type == TK_OP && t->op == OP_LPAREN)) {
        n = simple_stmt(P);
    } else {
        bp_error_here(P, "expected a statement");
        n = bp_node(P, N_ERROR, at);
        sync(P);
        bp_leave(P);
        return bp_done(P, n);
    }
    bp_leave(P);
    if (P->abort)
        return n;
    /* the statement's end */
    if (is_op(P, OP_SEMI)) {
        advance(P);
        return bp_done(P, n);
    }
    if (bp_is_terminator(P)) {
        if (n != BSL_NONE && P->t->nerrors == errors) /* not after a syntax error */
            P->t->nodes[n].flags |= NF_NO_SEMI;
        return n;
    }
    if (P->t->nerrors == errors)
        bp_error_here(P, "expected ';'");
    sync(P);
    return n;
}

static uint32_t block(struct parser *P)
{
    uint32_t b = bp_node(P, N_BLOCK, P->p);
    if (!bp_enter(P))
        return b;
    while (!P->abort && !at_eof(P)) {
        if (bp_is_terminator(P)) {
            if (terminator_expected(P))
                break;
            char tx[64], w[128];
            bp_tok_text(P, cur(P), tx, sizeof(tx));
            snprintf(w, sizeof(w), "unexpected %s", tx);
            bp_error_at(P, P->p, "%s", w);
            advance(P);
            continue;
        }
        size_t before = P->p;
        bp_add(P, b, statement(P));
        if (P->p == before) /* nothing consumed: never loop on it */
            advance(P);
    }
    bp_leave(P);
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
    uint32_t ps = bp_node(P, N_PARAMS, P->p);
    if (!is_op(P, OP_LPAREN)) {
        bp_error_here(P, "expected '('");
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
            bp_error_here(P, "expected a parameter name");
            break;
        }
        uint32_t p = bp_node(P, N_PARAM, P->p);
        if (p != BSL_NONE && val)
            P->t->nodes[p].flags |= NF_VAL;
        advance(P);
        if (is_op(P, OP_EQ)) {
            advance(P);
            bp_add(P, p, bp_unary(P));
        }
        bp_add(P, ps, bp_done(P, p));
        if (is_op(P, OP_COMMA))
            advance(P);
        else if (!is_op(P, OP_RPAREN)) {
            bp_error_here(P, "expected ',' or ')'");
            break;
        }
    }
    if (is_op(P, OP_RPAREN))
        advance(P);
    else /* skip the rest of the signature's line */
        while (!at_eof(P) && !(cur(P)->flags & BSL_TF_LINE_START) && !is_kw(P, KW_EXPORT))
            advance(P);
    return bp_done(P, ps);
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
    /* OneScript has no Асинх/Ждать, and its command classes name a method Выполнить */
    if (cur(P)->type == TK_IDENT ||
        (cur(P)->type == TK_KEYWORD &&
         (cur(P)->kw == KW_AWAIT || cur(P)->kw == KW_ASYNC || cur(P)->kw == KW_EXECUTE))) {
        m = bp_node(P, N_METHOD, P->p);
        advance(P);
    } else {
        bp_error_here(P, "expected the method's name");
        m = bp_node(P, N_METHOD, P->p);
    }
    if (m == BSL_NONE)
        return m;
    P->t->nodes[m].first_tok = first_directive != BSL_NONE ? first_directive : (uint32_t)at;
    P->t->nodes[m].aux2 = first_directive;
    bp_add(P, m, params(P));
    if (is_kw(P, KW_EXPORT)) {
        flags |= NF_EXPORT;
        advance(P);
    }
    P->t->nodes[m].flags = flags;
    P->in_method = true;
    P->open_if = P->open_loop = P->open_try = 0;
    bp_add(P, m, block(P));
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
    return bp_done(P, m);
}

int bsl_parse(const struct bsl_lexed *lx, struct bsl_tree *tree, struct bsl_err *err)
{
    memset(tree, 0, sizeof(*tree));
    tree->lx = lx;
    struct parser P = {.lx = lx, .t = tree, .last_err_tok = BSL_NONE};
    uint32_t root = bp_node(&P, N_MODULE, 0);
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
                                      (t->kw == KW_ASYNC && bp_is_terminator(&P)))) {
            bp_add(&P, root, method(&P, first_directive));
            first_directive = BSL_NONE;
        } else if (t->type == TK_KEYWORD && t->kw == KW_VAR) {
            uint32_t v = var_decl(&P, true);
            bp_add(&P, root, v);
            first_directive = BSL_NONE;
            if (is_op(&P, OP_SEMI))
                advance(&P);
            else
                bp_error_here(&P, "expected ';'");
        } else if (bp_is_terminator(&P)) {
            char tx[64];
            bp_tok_text(&P, t, tx, sizeof(tx));
            bp_error_at(&P, P.p, "unexpected %s", tx);
            advance(&P);
        } else {
            first_directive = BSL_NONE;
            bp_add(&P, root, statement(&P));
        }
        if (P.p == before)
            advance(&P);
    }
    if (P.oom) {
        bsl_tree_free(tree);
        return bsl_err_set(err, -ENOMEM, "out of memory parsing");
    }
    if (root != BSL_NONE)
        bp_done(&P, root);
    return 0;
}

void bsl_tree_free(struct bsl_tree *t)
{
    free(t->nodes);
    free(t->errors);
    memset(t, 0, sizeof(*t));
}
