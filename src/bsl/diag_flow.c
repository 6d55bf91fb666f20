/* Control flow: SemicolonPresence, FunctionShouldHaveReturn, ProcedureReturnsValue,
 * UnreachableCode, EmptyCodeBlock, MissingCodeTryCatchEx, IfElseIfEndsWithElse, UsingGoto,
 * EmptyStatement. */
#include "diag.h"

static const struct bsl_node *nd(const struct bsl_ctx *c, uint32_t i)
{
    return &c->t->nodes[i];
}

static bool is_jump(enum bsl_node_kind k)
{
    return k == N_RETURN || k == N_RAISE || k == N_BREAK || k == N_CONTINUE || k == N_GOTO;
}

/* Whether a preprocessor line sits between these two lines (exclusive). */
static bool pp_between(const struct bsl_ctx *c, uint32_t from_line, uint32_t to_line)
{
    for (size_t i = 0; i < c->lx->npps; i++) {
        uint32_t l = c->lx->pps[i].start.line;
        if (l >= from_line && l <= to_line)
            return true;
        if (l > to_line)
            break;
    }
    return false;
}

static void unreachable(struct bsl_ctx *c, uint32_t block)
{
    uint32_t jump = BSL_NONE;
    for (uint32_t s = nd(c, block)->child; s != BSL_NONE; s = nd(c, s)->next) {
        enum bsl_node_kind k = nd(c, s)->kind;
        if (k == N_LABEL) {
            jump = BSL_NONE;
            continue;
        }
        if (jump != BSL_NONE && k != N_EMPTY) {
            uint32_t last = s;
            while (nd(c, last)->next != BSL_NONE && nd(c, nd(c, last)->next)->kind != N_LABEL)
                last = nd(c, last)->next;
            struct bsl_range jr = bsl_node_range(c->t, jump);
            struct bsl_range r = bsl_span_range(c->lx, nd(c, s)->first_tok, nd(c, last)->last_tok);
            if (!pp_between(c, jr.end.line, r.start.line))
                bsl_emit(c, D_UNREACHABLE_CODE, r, "Code after %s never runs",
                         nd(c, jump)->kind == N_RETURN ? "Возврат (Return)"
                         : nd(c, jump)->kind == N_RAISE ? "ВызватьИсключение (Raise)"
                         : nd(c, jump)->kind == N_BREAK ? "Прервать (Break)"
                         : nd(c, jump)->kind == N_GOTO  ? "Перейти (Goto)"
                                                        : "Продолжить (Continue)");
            jump = BSL_NONE;
            s = last;
            continue;
        }
        if (is_jump(k))
            jump = s;
    }
}

static bool terminates_stmt(const struct bsl_ctx *c, uint32_t last);

/* Whether running this block always ends in Возврат or ВызватьИсключение: one of its
 * statements does (what follows it never runs). */
static bool terminates(const struct bsl_ctx *c, uint32_t block)
{
    for (uint32_t s = nd(c, block)->child; s != BSL_NONE; s = nd(c, s)->next)
        if (terminates_stmt(c, s))
            return true;
    return false;
}

static bool terminates_stmt(const struct bsl_ctx *c, uint32_t last)
{
    const struct bsl_node *n = nd(c, last);
    switch (n->kind) {
    case N_RETURN:
    case N_RAISE:
    case N_GOTO:
        return true;
    case N_IF: {
        bool has_else = false;
        for (uint32_t b = n->child; b != BSL_NONE; b = nd(c, b)->next) {
            uint32_t blk = nd(c, b)->kind == N_ELSE ? nd(c, b)->child : bsl_child(c->t, b, 1);
            has_else |= nd(c, b)->kind == N_ELSE;
            if (blk == BSL_NONE || !terminates(c, blk))
                return false;
        }
        return has_else;
    }
    case N_TRY: {
        uint32_t exc = bsl_child(c->t, last, 1);
        return terminates(c, n->child) && exc != BSL_NONE && nd(c, exc)->child != BSL_NONE &&
               terminates(c, nd(c, exc)->child);
    }
    case N_WHILE: { /* Пока Истина Цикл: only a Возврат inside leaves it */
        uint32_t cond = n->child;
        if (cond != BSL_NONE && nd(c, cond)->kind == N_LITERAL) {
            const struct bsl_token *t = &c->lx->toks[nd(c, cond)->tok];
            return t->type == TK_KEYWORD && t->kw == KW_TRUE;
        }
        return false;
    }
    default:
        return false;
    }
}

static void empty_block(struct bsl_ctx *c, uint32_t owner, uint32_t blk)
{
    if (blk == BSL_NONE || nd(c, blk)->kind != N_BLOCK || nd(c, blk)->child != BSL_NONE)
        return;
    char kw[64];
    bsl_tok_text(c->lx, nd(c, owner)->tok, kw, sizeof(kw));
    bsl_emit(c, D_EMPTY_CODE_BLOCK, bsl_tok_range(c->lx, nd(c, owner)->tok),
             "The block of %s is empty", kw);
}

struct flow {
    bool in_method, function;
};

static void walk(struct bsl_ctx *c, uint32_t i, const struct flow *f)
{
    const struct bsl_node *n = nd(c, i);
    if (bsl_is_statement(n->kind) && (n->flags & NF_NO_SEMI))
        bsl_emit(c, D_SEMICOLON_PRESENCE, bsl_tok_range(c->lx, n->last_tok),
                 "The statement should end with ';'");
    switch (n->kind) {
    case N_BLOCK:
        unreachable(c, i);
        break;
    case N_BRANCH:
        empty_block(c, i, bsl_child(c->t, i, 1));
        break;
    case N_ELSE:
        empty_block(c, i, n->child);
        break;
    case N_WHILE:
        empty_block(c, i, bsl_child(c->t, i, 1));
        break;
    case N_FOR:
        empty_block(c, i, bsl_child(c->t, i, 3));
        break;
    case N_FOREACH:
        empty_block(c, i, bsl_child(c->t, i, 2));
        break;
    case N_TRY:
        empty_block(c, i, n->child);
        break;
    case N_EXCEPT:
        if (n->child != BSL_NONE && nd(c, n->child)->child == BSL_NONE)
            bsl_emit(c, D_MISSING_CODE_TRY_CATCH_EX, bsl_tok_range(c->lx, n->tok),
                     "The exception is not handled: the Исключение (Except) block is empty");
        break;
    case N_IF: {
        unsigned branches = 0;
        bool has_else = false;
        uint32_t last_branch = BSL_NONE;
        for (uint32_t b = n->child; b != BSL_NONE; b = nd(c, b)->next) {
            if (nd(c, b)->kind == N_ELSE)
                has_else = true;
            else {
                branches++;
                last_branch = b;
            }
        }
        if (branches > 1 && !has_else)
            bsl_emit(c, D_IF_ELSEIF_ENDS_WITH_ELSE,
                     bsl_span_range(c->lx, n->tok, nd(c, last_branch)->tok),
                     "Если ... ИначеЕсли (If ... ElsIf) should end with an Иначе (Else) branch");
        break;
    }
    case N_RETURN:
        if (f->in_method && !f->function && n->child != BSL_NONE)
            bsl_emit(c, D_PROCEDURE_RETURNS_VALUE, bsl_node_range(c->t, i),
                     "A procedure cannot return a value");
        break;
    case N_GOTO:
        bsl_emit(c, D_USING_GOTO, bsl_node_range(c->t, i),
                 "Перейти (Goto) makes the flow hard to follow");
        break;
    case N_EMPTY:
        bsl_emit(c, D_EMPTY_STATEMENT, bsl_tok_range(c->lx, n->tok), "An empty statement");
        break;
    default:
        break;
    }
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        if (bsl_is_statement(nd(c, k)->kind) || nd(c, k)->kind == N_BLOCK ||
            nd(c, k)->kind == N_BRANCH || nd(c, k)->kind == N_ELSE || nd(c, k)->kind == N_EXCEPT)
            walk(c, k, f);
}

void bsl_check_flow(struct bsl_ctx *c)
{
    const struct bsl_tree *t = c->t;
    if (t->root == BSL_NONE)
        return;
    struct flow top = {0};
    for (uint32_t m = nd(c, t->root)->child; m != BSL_NONE; m = nd(c, m)->next) {
        const struct bsl_node *n = nd(c, m);
        if (n->kind != N_METHOD) {
            if (bsl_is_statement(n->kind))
                walk(c, m, &top);
            continue;
        }
        struct flow f = {.in_method = true, .function = n->flags & NF_FUNCTION};
        uint32_t body = bsl_child(t, m, 1);
        if (body == BSL_NONE)
            continue;
        walk(c, body, &f);
        if (f.function && !terminates(c, body)) {
            char name[128];
            bsl_tok_text(c->lx, n->tok, name, sizeof(name));
            bsl_emit(c, D_FUNCTION_SHOULD_HAVE_RETURN, bsl_tok_range(c->lx, n->tok),
                     "The function %s can end without Возврат (Return)", name);
        }
    }
}
