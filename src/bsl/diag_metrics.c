/* Method metrics and expression shape: NumberOfParams, MethodSize, CognitiveComplexity,
 * NestedTernaryOperator, DeprecatedMessage. */
#include "diag.h"

#include <string.h>

static const struct bsl_node *nd(const struct bsl_ctx *c, uint32_t i)
{
    return &c->t->nodes[i];
}

static int bool_op(const struct bsl_ctx *c, uint32_t i)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind != N_BINARY)
        return 0;
    const struct bsl_token *t = &c->lx->toks[n->tok];
    return t->type == TK_KEYWORD && (t->kw == KW_AND || t->kw == KW_OR) ? t->kw : 0;
}

/* The boolean operators of a chain in source order: +1 for each run of the same one. */
static void bool_runs(const struct bsl_ctx *c, uint32_t i, int *last, unsigned *score)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind == N_PAREN && n->child != BSL_NONE) {
        bool_runs(c, n->child, last, score);
        return;
    }
    int op = bool_op(c, i);
    if (!op)
        return;
    bool_runs(c, n->child, last, score);
    if (op != *last)
        (*score)++;
    *last = op;
    if (n->child != BSL_NONE && nd(c, n->child)->next != BSL_NONE)
        bool_runs(c, nd(c, n->child)->next, last, score);
}

struct cog {
    unsigned score;
    uint32_t method_name; /* for recursion */
};

static void cog_walk(const struct bsl_ctx *c, uint32_t i, unsigned nesting, bool in_bool,
                     struct cog *g)
{
    const struct bsl_node *n = nd(c, i);
    unsigned inner = nesting;
    switch (n->kind) {
    case N_IF: {
        bool first = true;
        for (uint32_t b = n->child; b != BSL_NONE; b = nd(c, b)->next) {
            g->score += first ? 1 + nesting : 1;
            first = false;
            if (nd(c, b)->kind == N_BRANCH) {
                cog_walk(c, nd(c, b)->child, nesting, false, g);
                uint32_t blk = bsl_child(c->t, b, 1);
                if (blk != BSL_NONE)
                    cog_walk(c, blk, nesting + 1, false, g);
            } else if (nd(c, b)->child != BSL_NONE) {
                cog_walk(c, nd(c, b)->child, nesting + 1, false, g);
            }
        }
        return;
    }
    case N_WHILE:
    case N_FOR:
    case N_FOREACH:
        g->score += 1 + nesting;
        for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
            cog_walk(c, k, nd(c, k)->kind == N_BLOCK ? nesting + 1 : nesting, false, g);
        return;
    case N_EXCEPT:
        g->score += 1 + nesting;
        inner = nesting + 1;
        break;
    case N_TERNARY:
        g->score += 1 + nesting;
        inner = nesting + 1;
        break;
    case N_GOTO:
        g->score += 1;
        break;
    case N_CALL: {
        uint32_t callee = n->child;
        if (callee != BSL_NONE && nd(c, callee)->kind == N_IDENT && g->method_name != BSL_NONE) {
            const struct bsl_token *a = &c->lx->toks[nd(c, callee)->tok],
                                   *b = &c->lx->toks[g->method_name];
            if (bsl_name_eq(c->lx->src + a->off, a->len, c->lx->src + b->off, b->len))
                g->score += 1; /* recursion */
        }
        break;
    }
    default:
        break;
    }
    bool chain = bool_op(c, i) != 0;
    if (chain && !in_bool) {
        int last = 0;
        bool_runs(c, i, &last, &g->score);
    }
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        cog_walk(c, k, inner, chain || (in_bool && n->kind == N_PAREN), g);
}

static void ternaries(struct bsl_ctx *c, uint32_t i, bool inside)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind == N_TERNARY) {
        if (inside)
            bsl_emit(c, D_NESTED_TERNARY_OPERATOR, bsl_node_range(c->t, i),
                     "A ?(...) inside another ?(...) is hard to read");
        inside = true;
    }
    if (n->kind == N_CALL && n->child != BSL_NONE && nd(c, n->child)->kind == N_IDENT) {
        const struct bsl_token *t = &c->lx->toks[nd(c, n->child)->tok];
        const char *s = c->lx->src + t->off;
        if (bsl_name_eq(s, t->len, "Сообщить", strlen("Сообщить")) ||
            bsl_name_eq(s, t->len, "Message", strlen("Message")))
            bsl_emit(c, D_DEPRECATED_MESSAGE, bsl_tok_range(c->lx, nd(c, n->child)->tok),
                     "%.*s() is deprecated: use СообщениеПользователю (UserMessage)", (int)t->len,
                     s);
    }
    if (bsl_is_statement(n->kind) || n->kind == N_BLOCK || n->kind == N_METHOD)
        inside = false;
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        ternaries(c, k, inside);
}

static void method(struct bsl_ctx *c, uint32_t m)
{
    const struct bsl_node *n = nd(c, m);
    char name[128];
    bsl_tok_text(c->lx, n->tok, name, sizeof(name));
    uint32_t ps = bsl_child(c->t, m, 0), body = bsl_child(c->t, m, 1);
    unsigned params = 0;
    for (uint32_t p = ps == BSL_NONE ? BSL_NONE : nd(c, ps)->child; p != BSL_NONE;
         p = nd(c, p)->next)
        params++;
    struct bsl_range nr = bsl_tok_range(c->lx, n->tok);
    if (params > BSL_PARAMS_MAX)
        bsl_emit(c, D_NUMBER_OF_PARAMS, nr, "The method %s has %u parameters (at most %d)", name,
                 params, BSL_PARAMS_MAX);
    uint32_t last_line = bsl_tok_range(c->lx, n->aux != BSL_NONE ? n->aux : n->last_tok).end.line;
    unsigned lines = last_line - nr.start.line + 1;
    if (lines > BSL_METHOD_LINES_MAX)
        bsl_emit(c, D_METHOD_SIZE, nr, "The method %s is %u lines long (at most %d)", name, lines,
                 BSL_METHOD_LINES_MAX);
    if (bsl_on(c, D_COGNITIVE_COMPLEXITY) && body != BSL_NONE) {
        struct cog g = {.method_name = n->tok};
        cog_walk(c, body, 0, false, &g);
        if (g.score > BSL_COGNITIVE_MAX)
            bsl_emit(c, D_COGNITIVE_COMPLEXITY, nr,
                     "The cognitive complexity of %s is %u (at most %d)", name, g.score,
                     BSL_COGNITIVE_MAX);
    }
}

void bsl_check_metrics(struct bsl_ctx *c)
{
    const struct bsl_tree *t = c->t;
    if (t->root == BSL_NONE)
        return;
    for (uint32_t m = nd(c, t->root)->child; m != BSL_NONE; m = nd(c, m)->next)
        if (nd(c, m)->kind == N_METHOD)
            method(c, m);
    if (bsl_on(c, D_NESTED_TERNARY_OPERATOR) || bsl_on(c, D_DEPRECATED_MESSAGE))
        ternaries(c, t->root, false);
}
