/* The BSL lexer: UTF-8 source to tokens, in both keyword languages (Russian and English,
 * matched case-insensitively, Cyrillic included). Comments and preprocessor lines are kept
 * beside the token stream (the parser never sees them; diagnostics read them). */
#ifndef SBX_BSL_LEXER_H
#define SBX_BSL_LEXER_H

#include "bsl.h"

enum bsl_tok_type {
    TK_EOF,
    TK_IDENT,
    TK_KEYWORD,
    TK_NUMBER,
    TK_STRING,    /* "...", possibly over several lines joined by | */
    TK_DATE,      /* '20240131' */
    TK_DIRECTIVE, /* &НаСервере, &Аннотация (its arguments are separate tokens) */
    TK_LABEL,     /* ~Метка */
    TK_OP,        /* punctuation and operators, op names which */
    TK_UNKNOWN,   /* a byte no token starts with */
};

enum bsl_op {
    OP_NONE,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACK,
    OP_RBRACK,
    OP_COMMA,
    OP_SEMI,
    OP_DOT,
    OP_COLON,
    OP_QUESTION,
    OP_PLUS,
    OP_MINUS,
    OP_STAR,
    OP_SLASH,
    OP_PERCENT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
};

/* Keywords; bsl_kw_ru/en give each one's canonical spelling. */
enum bsl_kw {
    KW_NONE,
    KW_PROCEDURE,
    KW_ENDPROCEDURE,
    KW_FUNCTION,
    KW_ENDFUNCTION,
    KW_VAR,
    KW_EXPORT,
    KW_VAL,
    KW_IF,
    KW_THEN,
    KW_ELSIF,
    KW_ELSE,
    KW_ENDIF,
    KW_FOR,
    KW_EACH,
    KW_IN,
    KW_TO,
    KW_WHILE,
    KW_DO,
    KW_ENDDO,
    KW_BREAK,
    KW_CONTINUE,
    KW_RETURN,
    KW_TRY,
    KW_EXCEPT,
    KW_RAISE,
    KW_ENDTRY,
    KW_NEW,
    KW_AND,
    KW_OR,
    KW_NOT,
    KW_TRUE,
    KW_FALSE,
    KW_UNDEFINED,
    KW_NULL,
    KW_GOTO,
    KW_EXECUTE,
    KW_ADDHANDLER,
    KW_REMOVEHANDLER,
    KW_ASYNC,
    KW_AWAIT,
    KW_COUNT_
};

struct bsl_token {
    uint8_t type;  /* enum bsl_tok_type */
    uint8_t kw;    /* enum bsl_kw for TK_KEYWORD */
    uint8_t op;    /* enum bsl_op for TK_OP */
    uint8_t flags; /* BSL_TF_* */
    uint32_t off, len;
    struct bsl_pos start, end;
    uint64_t hash; /* identifiers and keywords: a hash of the case-folded name */
};

#define BSL_TF_UNTERMINATED 1 /* a string or date without its closing quote */
#define BSL_TF_LINE_START 2   /* the first token on its line */

enum bsl_pp_kind {
    PP_REGION,
    PP_ENDREGION,
    PP_IF,
    PP_ELSIF,
    PP_ELSE,
    PP_ENDIF,
    PP_USE,
    PP_OTHER,
};

/* A preprocessor line (#Область Имя, #Если Сервер Тогда, #Использовать lib). */
struct bsl_pp {
    uint8_t kind;
    uint32_t off, len;           /* the whole line */
    uint32_t name_off, name_len; /* a region's name */
    struct bsl_pos start, end;
};

/* A // comment (to the end of its line). */
struct bsl_comment {
    uint32_t off, len; /* from the // */
    struct bsl_pos start, end;
    bool own_line; /* nothing but blanks before it on its line */
};

struct bsl_lexed {
    const char *src;
    size_t len;
    struct bsl_token *toks;
    size_t ntoks, cap_toks;
    struct bsl_pp *pps;
    size_t npps, cap_pps;
    struct bsl_comment *comments;
    size_t ncomments, cap_comments;
    uint32_t *line_off; /* byte offset of each line's start; line n at [n-1] */
    size_t nlines, cap_lines;
};

/* Tokenize src (not NUL-terminated; a UTF-8 BOM is skipped). The last token is TK_EOF.
 * 0, or a negative errno with err filled (only -EFBIG and -ENOMEM). */
int bsl_lex(const char *src, size_t len, struct bsl_lexed *out, struct bsl_err *err);
void bsl_lexed_free(struct bsl_lexed *lx);

/* The case-folded hash of a name (ASCII and Cyrillic letters folded to lower case). */
uint64_t bsl_name_hash(const char *s, size_t len);
/* Whether two names are equal ignoring case (ASCII and Cyrillic). */
bool bsl_name_eq(const char *a, size_t alen, const char *b, size_t blen);
/* The keyword a name is, or KW_NONE. */
enum bsl_kw bsl_keyword(const char *s, size_t len);
const char *bsl_kw_ru(enum bsl_kw k);
const char *bsl_kw_en(enum bsl_kw k);
/* Whether the spelling is one bsl-language-server calls canonical for that keyword. */
bool bsl_kw_canonical(enum bsl_kw k, const char *s, size_t len);
/* Code points in s[0..len). */
uint32_t bsl_utf8_count(const char *s, size_t len);

#endif
