/* Import circle with parser.c (allowed inside a folder, docs/architecture.md#layering): one
 * recursive-descent parser in two files for size; expressions use the parser's cursor, node
 * and error helpers, and statements parse expressions.
 *
 * The expression grammar of the BSL parser: Или, И, Не, comparisons, + - * / %, unary signs,
 * calls, members, indexes, ?(...), Новый, Ждать, literals (parse_int.h). */
#include <stdio.h>

#include "parse_int.h"

uint32_t bp_args(struct parser *P)
{
    uint32_t a = bp_node(P, N_ARGS, P->p);
    advance(P); /* ( */
    if (is_op(P, OP_RPAREN)) {
        advance(P);
        return bp_done(P, a);
    }
    for (;;) {
        if (P->abort)
            return a;
        if (is_op(P, OP_COMMA) || is_op(P, OP_RPAREN))
            bp_add(P, a, bp_node(P, N_NOARG, P->p));
        else
            bp_add(P, a, bp_expr(P));
        if (is_op(P, OP_COMMA)) {
            advance(P);
            continue;
        }
        if (is_op(P, OP_RPAREN))
            advance(P);
        else
            bp_error_here(P, "expected ',' or ')'");
        return bp_done(P, a);
    }
}

bool bp_member_name(const struct bsl_token *t)
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
            bp_error_at(P, at, "the date literal has no closing '");
        advance(P);
        return bp_done(P, bp_node(P, N_LITERAL, at));
    case TK_STRING:
        while (cur(P)->type == TK_STRING) { /* "a" "b" is one string */
            if (cur(P)->flags & BSL_TF_UNTERMINATED)
                bp_error_at(P, P->p, "the string has no closing \" (a next line goes on with |)");
            advance(P);
        }
        return bp_done(P, bp_node(P, N_LITERAL, at));
    case TK_IDENT:
        advance(P);
        return bp_done(P, bp_node(P, N_IDENT, at));
    case TK_OP:
        if (t->op == OP_LPAREN) {
            n = bp_node(P, N_PAREN, at);
            advance(P);
            bp_add(P, n, bp_expr(P));
            if (is_op(P, OP_RPAREN))
                advance(P);
            else
                bp_error_here(P, "expected ')'");
            return bp_done(P, n);
        }
        if (t->op == OP_QUESTION) {
            n = bp_node(P, N_TERNARY, at);
            advance(P);
            if (!is_op(P, OP_LPAREN)) {
                bp_error_here(P, "expected '(' after '?'");
                return bp_done(P, n);
            }
            advance(P);
            for (int k = 0; k < 3 && !P->abort; k++) {
                bp_add(P, n, bp_expr(P));
                if (k < 2 && !is_op(P, OP_COMMA)) {
                    bp_error_here(P, "expected ',' in ?(condition, then, else)");
                    return bp_done(P, n);
                }
                advance(P);
            }
            if (P->p > 0 &&
                !(P->lx->toks[P->p - 1].type == TK_OP && P->lx->toks[P->p - 1].op == OP_RPAREN))
                bp_error_at(P, P->p - 1, "expected ')' to end ?(...)");
            return bp_done(P, n);
        }
        break;
    case TK_KEYWORD:
        switch (t->kw) {
        case KW_TRUE:
        case KW_FALSE:
        case KW_UNDEFINED:
        case KW_NULL:
            advance(P);
            return bp_done(P, bp_node(P, N_LITERAL, at));
        case KW_NEW:
            advance(P);
            if (bp_member_name(cur(P))) {
                n = bp_node(P, N_NEW, P->p);
                advance(P);
            } else {
                n = bp_node(P, N_NEW, at);
            }
            if (n != BSL_NONE)
                P->t->nodes[n].first_tok = (uint32_t)at;
            if (is_op(P, OP_LPAREN))
                bp_add(P, n, bp_args(P));
            else if (P->t->nodes[n].tok == at)
                bp_error_here(P, "expected a type name or '(' after Новый");
            return bp_done(P, n);
        case KW_EXECUTE: /* Выполнить(...) as a name: a OneScript method's */
            advance(P);
            return bp_done(P, bp_node(P, N_IDENT, at));
        case KW_AWAIT:
            n = bp_node(P, N_UNARY, at);
            advance(P);
            bp_add(P, n, bp_expr(P));
            return bp_done(P, n);
        default:
            break;
        }
        break;
    default:
        break;
    }
    bp_error_here(P, "expected an expression");
    n = bp_node(P, N_ERROR, at);
    if (!bp_is_terminator(P) && !is_op(P, OP_SEMI) && !is_op(P, OP_RPAREN) && !is_op(P, OP_COMMA))
        advance(P);
    return bp_done(P, n);
}

uint32_t bp_postfix(struct parser *P)
{
    uint32_t n = primary(P);
    while (!P->abort && n != BSL_NONE) {
        size_t at = P->p;
        uint32_t m;
        if (is_op(P, OP_DOT)) {
            advance(P);
            if (!bp_member_name(cur(P))) {
                bp_error_here(P, "expected a name after '.'");
                return n;
            }
            m = bp_node(P, N_MEMBER, P->p);
            advance(P);
        } else if (is_op(P, OP_LPAREN)) {
            m = bp_node(P, N_CALL, at);
            if (m == BSL_NONE)
                return n;
            bp_add(P, m, n);
            bp_add(P, m, bp_args(P));
            P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
            n = bp_done(P, m);
            continue;
        } else if (is_op(P, OP_LBRACK)) {
            m = bp_node(P, N_INDEX, at);
            advance(P);
            if (m == BSL_NONE)
                return n;
            bp_add(P, m, n);
            bp_add(P, m, bp_expr(P));
            if (is_op(P, OP_RBRACK))
                advance(P);
            else
                bp_error_here(P, "expected ']'");
            P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
            n = bp_done(P, m);
            continue;
        } else {
            return n;
        }
        if (m == BSL_NONE)
            return n;
        /* a member: the object is its child */
        bp_add(P, m, n);
        P->t->nodes[m].first_tok = P->t->nodes[n].first_tok;
        n = bp_done(P, m);
    }
    return n;
}

static uint32_t binary(struct parser *P, uint32_t left, size_t op_tok, uint32_t right)
{
    uint32_t n = bp_node(P, N_BINARY, op_tok);
    if (n == BSL_NONE)
        return left;
    bp_add(P, n, left);
    bp_add(P, n, right);
    if (left != BSL_NONE)
        P->t->nodes[n].first_tok = P->t->nodes[left].first_tok;
    return bp_done(P, n);
}

uint32_t bp_unary(struct parser *P)
{
    if (is_op(P, OP_MINUS) || is_op(P, OP_PLUS)) {
        uint32_t n = bp_node(P, N_UNARY, P->p);
        advance(P);
        if (!bp_enter(P))
            return n;
        bp_add(P, n, bp_unary(P));
        bp_leave(P);
        return bp_done(P, n);
    }
    return bp_postfix(P);
}

static uint32_t mul(struct parser *P)
{
    uint32_t l = bp_unary(P);
    while (!P->abort && (is_op(P, OP_STAR) || is_op(P, OP_SLASH) || is_op(P, OP_PERCENT))) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, bp_unary(P));
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
        uint32_t n = bp_node(P, N_UNARY, P->p);
        advance(P);
        if (!bp_enter(P))
            return n;
        bp_add(P, n, not_expr(P));
        bp_leave(P);
        return bp_done(P, n);
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

uint32_t bp_expr(struct parser *P)
{
    if (!bp_enter(P))
        return BSL_NONE;
    uint32_t l = and_expr(P);
    while (!P->abort && is_kw(P, KW_OR)) {
        size_t at = P->p;
        advance(P);
        l = binary(P, l, at, and_expr(P));
    }
    bp_leave(P);
    return l;
}
