/* The diagnostics: each one's bsl-language-server code, severity and type, the list a
 * module's checks fill, and the checks themselves (one file per concern: diag_flow.c,
 * diag_vars.c, diag_style.c, diag_metrics.c). */
#ifndef SBX_BSL_DIAG_H
#define SBX_BSL_DIAG_H

#include "parser.h"

enum bsl_diag_id {
    D_PARSE_ERROR,
    D_UNUSED_LOCAL_VARIABLE,
    D_UNUSED_PARAMETERS,
    D_EMPTY_CODE_BLOCK,
    D_LINE_LENGTH,
    D_CANONICAL_SPELLING_KEYWORDS,
    D_SEMICOLON_PRESENCE,
    D_FUNCTION_SHOULD_HAVE_RETURN,
    D_PROCEDURE_RETURNS_VALUE,
    D_UNREACHABLE_CODE,
    D_NESTED_TERNARY_OPERATOR,
    D_NUMBER_OF_PARAMS,
    D_METHOD_SIZE,
    D_COGNITIVE_COMPLEXITY,
    D_COMMENTED_CODE,
    D_USING_SERVICE_TAG,
    D_DUPLICATE_REGION,
    D_IF_ELSEIF_ENDS_WITH_ELSE,
    D_USELESS_FOR_EACH,
    D_MISSING_CODE_TRY_CATCH_EX,
    D_EMPTY_STATEMENT,
    D_USING_GOTO,
    D_SELF_ASSIGN,
    D_DEPRECATED_MESSAGE,
    D_EMPTY_REGION,
    D_IDENTICAL_EXPRESSIONS,
    D_PAIRING_BROKEN_TRANSACTION,
    D_EXECUTE_EXTERNAL_CODE,
    D_COUNT_
};

enum bsl_severity { SEV_INFO, SEV_MINOR, SEV_MAJOR, SEV_CRITICAL, SEV_BLOCKER };
enum bsl_dtype { DT_ERROR, DT_CODE_SMELL, DT_VULNERABILITY };

/* The thresholds, bsl-language-server's defaults. */
#define BSL_LINE_LENGTH_MAX 120
#define BSL_PARAMS_MAX 7
#define BSL_METHOD_LINES_MAX 200
#define BSL_COGNITIVE_MAX 15

struct bsl_diag_info {
    const char *code;
    enum bsl_severity severity;
    enum bsl_dtype type;
    const char *summary; /* one line, for --list and docs */
    bool bsl_only;       /* not for OneScript (.os), as bsl-language-server's scope BSL */
};

const struct bsl_diag_info *bsl_diag_info(enum bsl_diag_id id);
/* The id of a code (exact, as bsl-language-server spells it), or -1. */
int bsl_diag_by_code(const char *code, size_t len);
/* "Error", "Warning", "Information" or "Hint", as the JSON reporter writes it. */
const char *bsl_lsp_severity(enum bsl_diag_id id);
const char *bsl_severity_name(enum bsl_severity s);

struct bsl_diag {
    uint16_t id;
    struct bsl_range range;
    char msg[BSL_MSG_MAX];
};

struct bsl_diags {
    /* Set before the analysis: a form's or an object's module (or a record set's, a value
     * manager's), where bare names can be the form's or the object's attributes, which sbx-bsl
     * cannot see (docs/bsl.md); bsl_module_kind() tells from the path. */
    bool attributes;
    struct bsl_diag *v;
    size_t n, cap;
    bool truncated; /* past BSL_MODULE_DIAGS_MAX */
    bool oom;
};

/* What every check gets. */
struct bsl_ctx {
    const struct bsl_lexed *lx;
    const struct bsl_tree *t;
    struct bsl_diags *out;
    const bool *enabled; /* [D_COUNT_] */
};

void bsl_emit(struct bsl_ctx *c, enum bsl_diag_id id, struct bsl_range r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline bool bsl_on(const struct bsl_ctx *c, enum bsl_diag_id id)
{
    return c->enabled[id];
}

/* Two expressions are the same text (names ignoring case), and call nothing. */
bool bsl_same_text(const struct bsl_ctx *c, uint32_t a, uint32_t b);

struct bsl_range bsl_tok_range(const struct bsl_lexed *lx, uint32_t tok);
struct bsl_range bsl_span_range(const struct bsl_lexed *lx, uint32_t first, uint32_t last);
struct bsl_range bsl_node_range(const struct bsl_tree *t, uint32_t n);
/* A token's text, at most size-1 bytes, cut at a code point. */
void bsl_tok_text(const struct bsl_lexed *lx, uint32_t tok, char *buf, size_t size);

/* The checks, by concern. */
void bsl_check_flow(struct bsl_ctx *c);
void bsl_check_vars(struct bsl_ctx *c);
void bsl_check_style(struct bsl_ctx *c);
void bsl_check_metrics(struct bsl_ctx *c);
void bsl_check_calls(struct bsl_ctx *c);

/* Run every enabled check over a lexed and parsed module; the list comes out in position
 * order. 0, or -ENOMEM with err filled. */
int bsl_diagnose(const struct bsl_lexed *lx, const struct bsl_tree *t, const bool *enabled,
                 struct bsl_diags *out, struct bsl_err *err);
void bsl_diags_free(struct bsl_diags *d);

/* The diagnostics that apply to a module at path: enabled less those whose scope excludes
 * its language (a .os file is OneScript). */
void bsl_scope(const char *path, const bool *enabled, bool *out);
/* Whether the module at path is one whose bare names can be attributes (struct bsl_diags). */
bool bsl_module_kind(const char *path);

/* Lex, parse and diagnose one module's text. */
int bsl_analyze(const char *src, size_t len, const bool *enabled, struct bsl_diags *out,
                struct bsl_err *err);

#endif
