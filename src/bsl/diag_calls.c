/* Calls and operators: IdenticalExpressions, PairingBrokenTransaction, ExecuteExternalCode;
 * and the regions' EmptyRegion. */
#include <stdlib.h>
#include <string.h>

#include "diag.h"

static const struct bsl_node *nd(const struct bsl_ctx *c, uint32_t i)
{
    return &c->t->nodes[i];
}

static bool named(const struct bsl_ctx *c, uint32_t tok, const char *ru, const char *en)
{
    const struct bsl_token *t = &c->lx->toks[tok];
    const char *s = c->lx->src + t->off;
    return bsl_name_eq(s, t->len, ru, strlen(ru)) || bsl_name_eq(s, t->len, en, strlen(en));
}

/* The global function a call node calls (its callee a bare name), or BSL_NONE. */
static uint32_t callee(const struct bsl_ctx *c, uint32_t i)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind != N_CALL || n->child == BSL_NONE || nd(c, n->child)->kind != N_IDENT)
        return BSL_NONE;
    return nd(c, n->child)->tok;
}

/* Operators whose two equal sides are a mistake (a + a and a * a are arithmetic). */
static bool checked_op(const struct bsl_token *t)
{
    if (t->type == TK_KEYWORD)
        return t->kw == KW_AND || t->kw == KW_OR;
    return t->type == TK_OP && ((t->op >= OP_EQ && t->op <= OP_GE) || t->op == OP_MINUS ||
                                t->op == OP_SLASH || t->op == OP_PERCENT);
}

struct tx {
    uint32_t begin, commit; /* the first of each in the method, or BSL_NONE */
};

static void walk(struct bsl_ctx *c, uint32_t i, struct tx *tx)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind == N_BINARY && n->child != BSL_NONE && nd(c, n->child)->next != BSL_NONE &&
        checked_op(&c->lx->toks[n->tok]) && bsl_same_text(c, n->child, nd(c, n->child)->next)) {
        char op[16];
        bsl_tok_text(c->lx, n->tok, op, sizeof(op));
        bsl_emit(c, D_IDENTICAL_EXPRESSIONS, bsl_node_range(c->t, i),
                 "The same expression on both sides of %s", op);
    }
    uint32_t f = callee(c, i);
    if (f != BSL_NONE) {
        if (named(c, f, "НачатьТранзакцию", "BeginTransaction") && tx->begin == BSL_NONE)
            tx->begin = f;
        if ((named(c, f, "ЗафиксироватьТранзакцию", "CommitTransaction") ||
             named(c, f, "ОтменитьТранзакцию", "RollbackTransaction")) &&
            tx->commit == BSL_NONE)
            tx->commit = f;
        if (named(c, f, "Выполнить", "Execute") || named(c, f, "Вычислить", "Eval"))
            bsl_emit(c, D_EXECUTE_EXTERNAL_CODE, bsl_tok_range(c->lx, f),
                     "Code made at run time runs here: check where its text comes from");
    }
    if (n->kind == N_EXECUTE)
        bsl_emit(c, D_EXECUTE_EXTERNAL_CODE, bsl_tok_range(c->lx, n->tok),
                 "Code made at run time runs here: check where its text comes from");
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        walk(c, k, tx);
}

static void empty_regions(struct bsl_ctx *c)
{
    const struct bsl_lexed *lx = c->lx;
    size_t n = lx->npps, depth = 0, t = 0;
    if (!n)
        return;
    size_t *stack = malloc(n * sizeof(size_t));
    if (!stack) {
        c->out->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct bsl_pp *p = &lx->pps[i];
        if (p->kind == PP_REGION) {
            stack[depth++] = i;
        } else if (p->kind == PP_ENDREGION && depth) {
            const struct bsl_pp *open = &lx->pps[stack[--depth]];
            /* the first token past the region's line */
            size_t lo = 0, hi = lx->ntoks;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (lx->toks[mid].start.line <= open->start.line)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            t = lo;
            if (t >= lx->ntoks || lx->toks[t].type == TK_EOF ||
                lx->toks[t].start.line >= p->start.line)
                bsl_emit(c, D_EMPTY_REGION, (struct bsl_range){open->start, open->end},
                         "The region \"%.*s\" is empty", (int)open->name_len,
                         lx->src + open->name_off);
        }
    }
    free(stack);
}

void bsl_check_calls(struct bsl_ctx *c)
{
    const struct bsl_tree *t = c->t;
    if (bsl_on(c, D_EMPTY_REGION))
        empty_regions(c);
    if (t->root == BSL_NONE)
        return;
    for (uint32_t m = nd(c, t->root)->child; m != BSL_NONE; m = nd(c, m)->next) {
        struct tx tx = {BSL_NONE, BSL_NONE};
        walk(c, m, &tx);
        if (nd(c, m)->kind != N_METHOD)
            continue;
        if (tx.begin != BSL_NONE && tx.commit == BSL_NONE)
            bsl_emit(c, D_PAIRING_BROKEN_TRANSACTION, bsl_tok_range(c->lx, tx.begin),
                     "НачатьТранзакцию (BeginTransaction) without ЗафиксироватьТранзакцию "
                     "(CommitTransaction) or ОтменитьТранзакцию in the same method");
        else if (tx.commit != BSL_NONE && tx.begin == BSL_NONE)
            bsl_emit(c, D_PAIRING_BROKEN_TRANSACTION, bsl_tok_range(c->lx, tx.commit),
                     "The transaction ends in a method that did not begin it");
    }
}
