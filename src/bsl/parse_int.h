/* The parser's own state and helpers, shared by parser.c (statements, methods, the module,
 * recovery) and expr.c (expressions). Not for use outside src/bsl/parser.c and expr.c. */
#ifndef SBX_BSL_PARSE_INT_H
#define SBX_BSL_PARSE_INT_H

#include "parser.h"

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

static inline const struct bsl_token *cur(const struct parser *P)
{
    return &P->lx->toks[P->p];
}
static inline const struct bsl_token *peek(const struct parser *P, size_t k)
{
    size_t i = P->p + k;
    return &P->lx->toks[i < P->lx->ntoks ? i : P->lx->ntoks - 1];
}
static inline bool at_eof(const struct parser *P)
{
    return cur(P)->type == TK_EOF;
}
static inline bool is_kw(const struct parser *P, enum bsl_kw k)
{
    return cur(P)->type == TK_KEYWORD && cur(P)->kw == k;
}
static inline bool is_op(const struct parser *P, enum bsl_op o)
{
    return cur(P)->type == TK_OP && cur(P)->op == o;
}
static inline void advance(struct parser *P)
{
    if (!at_eof(P))
        P->p++;
}

/* parser.c */
uint32_t bp_node(struct parser *P, enum bsl_node_kind kind, size_t tok);
void bp_add(struct parser *P, uint32_t parent, uint32_t child);
/* The node spans up to the token before the current one. */
uint32_t bp_done(struct parser *P, uint32_t n);
void bp_error_at(struct parser *P, size_t tok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "what, found 'x'" at the current token (from the end of the previous line's last token
 * when the current one starts a later line). */
void bp_error_here(struct parser *P, const char *what);
/* The token as text for a message, at most 40 bytes. */
void bp_tok_text(const struct parser *P, const struct bsl_token *tk, char *buf, size_t size);
/* Recursion guards: false (and the parse stops) past BSL_DEPTH_MAX. */
bool bp_enter(struct parser *P);
void bp_leave(struct parser *P);
/* Whether the current token ends a block (an end keyword, a method's start, EOF). */
bool bp_is_terminator(const struct parser *P);

/* expr.c */
uint32_t bp_expr(struct parser *P);
/* ( arguments ) at the current (. */
uint32_t bp_args(struct parser *P);
uint32_t bp_postfix(struct parser *P);
uint32_t bp_unary(struct parser *P);
bool bp_member_name(const struct bsl_token *t);

#endif
