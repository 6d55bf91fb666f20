/* The analysis of one module: lex, parse, then every check (diag_*.c), their diagnostics in
 * source order. Apart from diag.c, whose table and helpers the checks use, so that the checks
 * and what runs them form no circle. */
#include <errno.h>
#include <stdlib.h>

#include "diag.h"

static int pos_cmp(struct bsl_pos a, struct bsl_pos b)
{
    if (a.line != b.line)
        return a.line < b.line ? -1 : 1;
    return a.col < b.col ? -1 : a.col > b.col;
}

static int diag_cmp(const void *a, const void *b)
{
    const struct bsl_diag *x = a, *y = b;
    int r = pos_cmp(x->range.start, y->range.start);
    return r ? r : (int)x->id - (int)y->id;
}

int bsl_diagnose(const struct bsl_lexed *lx, const struct bsl_tree *t, const bool *enabled,
                 struct bsl_diags *out, struct bsl_err *err)
{
    struct bsl_ctx c = {.lx = lx, .t = t, .out = out, .enabled = enabled};
    for (size_t i = 0; i < t->nerrors; i++) {
        const struct bsl_syntax_error *e = &t->errors[i];
        struct bsl_range r = bsl_tok_range(lx, e->tok);
        if (e->prev != BSL_NONE) /* from the end of the line that lacks something */
            r.start = lx->toks[e->prev].end;
        bsl_emit(&c, D_PARSE_ERROR, r, "%s", e->msg);
    }
    bsl_check_flow(&c);
    bsl_check_vars(&c);
    bsl_check_style(&c);
    bsl_check_metrics(&c);
    bsl_check_calls(&c);
    if (out->oom)
        return bsl_err_set(err, -ENOMEM, "out of memory in diagnostics");
    if (out->n)
        qsort(out->v, out->n, sizeof(*out->v), diag_cmp);
    return 0;
}

int bsl_analyze(const char *src, size_t len, const bool *enabled, struct bsl_diags *out,
                struct bsl_err *err)
{
    struct bsl_lexed lx;
    struct bsl_tree t;
    int r = bsl_lex(src, len, &lx, err);
    if (r < 0)
        return r;
    r = bsl_parse(&lx, &t, err);
    if (r == 0) {
        r = bsl_diagnose(&lx, &t, enabled, out, err);
        bsl_tree_free(&t);
    }
    bsl_lexed_free(&lx);
    return r;
}
