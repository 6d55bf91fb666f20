/* The BSL parser: tokens to a tree of modules, methods, statements and expressions, with
 * recovery after a syntax error (the error is recorded, tokens are skipped to the next
 * statement or block boundary, and parsing goes on). */
#ifndef SBX_BSL_PARSER_H
#define SBX_BSL_PARSER_H

#include "lexer.h"

enum bsl_node_kind {
    N_MODULE,  /* children: N_VARDECL, N_METHOD and statements, in order */
    N_VARDECL, /* Перем a, b Экспорт; children: N_IDENT (the names) */
    N_METHOD,  /* tok: the name; children: N_PARAMS, N_BLOCK (the body) */
    N_PARAMS,  /* children: N_PARAM */
    N_PARAM,   /* tok: the name; flags NF_VAL; child: the default value, if any */
    N_BLOCK,   /* children: statements */
    /* statements; tok: the first token */
    N_ASSIGN,   /* children: target, value */
    N_CALLSTMT, /* child: the call expression */
    N_IF,       /* children: N_BRANCH (If, then each ElsIf; tok its keyword), N_ELSE? */
    N_BRANCH,   /* children: condition, N_BLOCK */
    N_ELSE,     /* child: N_BLOCK */
    N_WHILE,    /* children: condition, N_BLOCK */
    N_FOR,      /* children: N_IDENT (variable), from, to, N_BLOCK */
    N_FOREACH,  /* children: N_IDENT (variable), collection, N_BLOCK */
    N_TRY,      /* children: N_BLOCK (try), N_EXCEPT */
    N_EXCEPT,   /* tok: Исключение; child: N_BLOCK */
    N_RETURN,   /* child: the value, if any */
    N_BREAK,
    N_CONTINUE,
    N_RAISE,     /* child: the expression or the argument list, if any */
    N_GOTO,      /* tok: the label */
    N_LABEL,     /* tok: the label */
    N_EXECUTE,   /* child: the expression */
    N_HANDLER,   /* Add/RemoveHandler; children: two expressions */
    N_EMPTY,     /* a lone ; */
    N_AWAITSTMT, /* child: the expression */
    /* expressions; tok: the operator or the name */
    N_IDENT,
    N_LITERAL,
    N_BINARY, /* children: left, right; tok: the operator */
    N_UNARY,  /* child: the operand; tok: the operator (Не, -, +, Ждать) */
    N_CALL,   /* children: callee, then N_ARGS */
    N_ARGS,   /* children: arguments (N_NOARG for an omitted one) */
    N_NOARG,
    N_INDEX,   /* children: object, index */
    N_MEMBER,  /* child: object; tok: the member's name */
    N_NEW,     /* tok: the type name (or Новый when given as a call); child: N_ARGS? */
    N_TERNARY, /* tok: ?; children: condition, then, else */
    N_PAREN,   /* child: the expression */
    N_ERROR,   /* what could not be parsed */
};

#define NF_VAL 1      /* a parameter taken by value */
#define NF_EXPORT 2   /* an exported method or variable */
#define NF_FUNCTION 4 /* a Функция (else a Процедура) */
#define NF_NO_SEMI 8  /* a statement that ended at its block's end without ; */
#define NF_ASYNC 16

#define BSL_NONE UINT32_MAX

struct bsl_node {
    uint8_t kind;
    uint8_t flags;
    uint32_t tok;                 /* see the kind */
    uint32_t first_tok, last_tok; /* the tokens it spans */
    uint32_t child, next;         /* the first child, the next sibling (BSL_NONE) */
    uint32_t last;                /* the last child (the parser appends there) */
    uint32_t height;              /* of the subtree: 0 for a leaf */
    uint32_t aux;                 /* N_METHOD: the end keyword's token (or BSL_NONE) */
    uint32_t aux2;                /* N_METHOD: the first directive token, or BSL_NONE */
};

struct bsl_syntax_error {
    uint32_t tok;  /* where */
    uint32_t prev; /* an "expected" error on a line after the last good token: that token, so
                      the error is reported from its end (the line that lacks something) */
    char msg[BSL_MSG_MAX];
};

struct bsl_tree {
    const struct bsl_lexed *lx;
    struct bsl_node *nodes;
    size_t nnodes, cap;
    uint32_t root;
    struct bsl_syntax_error *errors;
    size_t nerrors, cap_errors;
};

/* Parse the tokens of lx (which must outlive the tree). Syntax errors are in tree->errors;
 * the return is 0, or -ENOMEM with err filled. */
int bsl_parse(const struct bsl_lexed *lx, struct bsl_tree *tree, struct bsl_err *err);
void bsl_tree_free(struct bsl_tree *t);

static inline struct bsl_node *bsl_node(const struct bsl_tree *t, uint32_t i)
{
    return i == BSL_NONE ? NULL : &t->nodes[i];
}
/* The n-th child (0-based) of node i, or BSL_NONE. */
uint32_t bsl_child(const struct bsl_tree *t, uint32_t i, unsigned n);
/* Whether a node is a statement. */
bool bsl_is_statement(enum bsl_node_kind k);

#endif
