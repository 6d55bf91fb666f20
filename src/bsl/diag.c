#include "diag.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct bsl_diag_info infos[D_COUNT_] = {
    [D_PARSE_ERROR] = {"ParseError", SEV_CRITICAL, DT_ERROR, "the module does not parse"},
    [D_UNUSED_LOCAL_VARIABLE] = {"UnusedLocalVariable", SEV_MAJOR, DT_CODE_SMELL,
                                 "a local variable is never read"},
    [D_UNUSED_PARAMETERS] = {"UnusedParameters", SEV_MAJOR, DT_CODE_SMELL,
                             "a parameter is never used"},
    [D_EMPTY_CODE_BLOCK] = {"EmptyCodeBlock", SEV_MAJOR, DT_CODE_SMELL, "an empty code block"},
    [D_LINE_LENGTH] = {"LineLength", SEV_MINOR, DT_CODE_SMELL, "a line longer than 120 characters"},
    [D_CANONICAL_SPELLING_KEYWORDS] = {"CanonicalSpellingKeywords", SEV_INFO, DT_CODE_SMELL,
                                       "a keyword not spelled canonically"},
    [D_SEMICOLON_PRESENCE] = {"SemicolonPresence", SEV_MINOR, DT_CODE_SMELL,
                              "a statement without its closing ;"},
    [D_FUNCTION_SHOULD_HAVE_RETURN] = {"FunctionShouldHaveReturn", SEV_MAJOR, DT_ERROR,
                                       "a function can end without Возврат"},
    [D_PROCEDURE_RETURNS_VALUE] = {"ProcedureReturnsValue", SEV_BLOCKER, DT_ERROR,
                                   "a procedure returns a value"},
    [D_UNREACHABLE_CODE] = {"UnreachableCode", SEV_MINOR, DT_ERROR, "code that never runs"},
    [D_NESTED_TERNARY_OPERATOR] = {"NestedTernaryOperator", SEV_MAJOR, DT_CODE_SMELL,
                                   "a ?(...) inside another"},
    [D_NUMBER_OF_PARAMS] = {"NumberOfParams", SEV_MINOR, DT_CODE_SMELL,
                            "a method with more than 7 parameters"},
    [D_METHOD_SIZE] = {"MethodSize", SEV_MAJOR, DT_CODE_SMELL, "a method longer than 200 lines"},
    [D_COGNITIVE_COMPLEXITY] = {"CognitiveComplexity", SEV_CRITICAL, DT_CODE_SMELL,
                                "a method's cognitive complexity is over 15"},
    [D_COMMENTED_CODE] = {"CommentedCode", SEV_MINOR, DT_CODE_SMELL, "commented-out code"},
    [D_USING_SERVICE_TAG] = {"UsingServiceTag", SEV_INFO, DT_CODE_SMELL,
                             "a service tag (TODO, FIXME, ...) in a comment"},
    [D_DUPLICATE_REGION] = {"DuplicateRegion", SEV_INFO, DT_CODE_SMELL, "a region name used twice"},
    [D_IF_ELSEIF_ENDS_WITH_ELSE] = {"IfElseIfEndsWithElse", SEV_MAJOR, DT_CODE_SMELL,
                                    "Если ... ИначеЕсли without a final Иначе"},
    [D_USELESS_FOR_EACH] = {"UseLessForEach", SEV_CRITICAL, DT_ERROR,
                            "a Для Каждого loop that never uses its variable"},
    [D_MISSING_CODE_TRY_CATCH_EX] = {"MissingCodeTryCatchEx", SEV_MAJOR, DT_ERROR,
                                     "an empty Исключение block"},
    [D_EMPTY_STATEMENT] = {"EmptyStatement", SEV_INFO, DT_CODE_SMELL, "an empty statement (;)"},
    [D_USING_GOTO] = {"UsingGoto", SEV_CRITICAL, DT_CODE_SMELL, "Перейти (Goto)"},
    [D_SELF_ASSIGN] = {"SelfAssign", SEV_MAJOR, DT_ERROR, "a variable assigned to itself"},
    [D_DEPRECATED_MESSAGE] = {"DeprecatedMessage", SEV_MINOR, DT_CODE_SMELL,
                              "Сообщить() (Message()), deprecated", true},
    [D_EMPTY_REGION] = {"EmptyRegion", SEV_INFO, DT_CODE_SMELL, "a region with no code"},
    [D_IDENTICAL_EXPRESSIONS] = {"IdenticalExpressions", SEV_MAJOR, DT_ERROR,
                                 "the same expression on both sides of an operator"},
    [D_PAIRING_BROKEN_TRANSACTION] = {"PairingBrokenTransaction", SEV_MAJOR, DT_ERROR,
                                      "НачатьТранзакцию without ЗафиксироватьТранзакцию, or "
                                      "the reverse, in a method"},
    [D_EXECUTE_EXTERNAL_CODE] = {"ExecuteExternalCode", SEV_CRITICAL, DT_VULNERABILITY,
                                 "Выполнить or Вычислить runs code made at run time", true},
};

const struct bsl_diag_info *bsl_diag_info(enum bsl_diag_id id)
{
    return &infos[id];
}

void bsl_scope(const char *path, const bool *enabled, bool *out)
{
    size_t n = strlen(path);
    bool os = n > 3 && !strcasecmp(path + n - 3, ".os");
    for (int i = 0; i < D_COUNT_; i++)
        out[i] = enabled[i] && !(os && infos[i].bsl_only);
}

bool bsl_module_kind(const char *path)
{
    static const char *const ends[] = {"ObjectModule.bsl", "RecordSetModule.bsl",
                                       "ValueManagerModule.bsl", "/Form/Module.bsl"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        size_t m = strlen(ends[i]);
        if (n >= m && !strcasecmp(path + n - m, ends[i]))
            return true;
    }
    return strstr(path, "/Forms/") != NULL;
}

int bsl_diag_by_code(const char *code, size_t len)
{
    for (int i = 0; i < D_COUNT_; i++)
        if (strlen(infos[i].code) == len && !strncmp(infos[i].code, code, len))
            return i;
    return -1;
}

const char *bsl_lsp_severity(enum bsl_diag_id id)
{
    if (infos[id].type == DT_ERROR || infos[id].severity == SEV_BLOCKER)
        return "Error";
    switch (infos[id].severity) {
    case SEV_CRITICAL:
    case SEV_MAJOR:
        return "Warning";
    case SEV_MINOR:
        return "Information";
    default:
        return "Hint";
    }
}

const char *bsl_severity_name(enum bsl_severity s)
{
    static const char *const names[] = {"Info", "Minor", "Major", "Critical", "Blocker"};
    return s <= SEV_BLOCKER ? names[s] : "Info";
}

struct bsl_range bsl_tok_range(const struct bsl_lexed *lx, uint32_t tok)
{
    const struct bsl_token *t = &lx->toks[tok < lx->ntoks ? tok : lx->ntoks - 1];
    return (struct bsl_range){t->start, t->end};
}

struct bsl_range bsl_span_range(const struct bsl_lexed *lx, uint32_t first, uint32_t last)
{
    if (last < first)
        last = first;
    return (struct bsl_range){bsl_tok_range(lx, first).start, bsl_tok_range(lx, last).end};
}

struct bsl_range bsl_node_range(const struct bsl_tree *t, uint32_t n)
{
    return bsl_span_range(t->lx, t->nodes[n].first_tok, t->nodes[n].last_tok);
}

void bsl_tok_text(const struct bsl_lexed *lx, uint32_t tok, char *buf, size_t size)
{
    const struct bsl_token *t = &lx->toks[tok];
    size_t n = t->len < size ? t->len : size - 1;
    while (n < t->len && n > 0 && ((unsigned char)lx->src[t->off + n] & 0xC0) == 0x80)
        n--;
    memcpy(buf, lx->src + t->off, n);
    buf[n] = 0;
}

bool bsl_same_text(const struct bsl_ctx *c, uint32_t a, uint32_t b)
{
    const struct bsl_node *x = &c->t->nodes[a], *y = &c->t->nodes[b];
    if (x->last_tok - x->first_tok != y->last_tok - y->first_tok)
        return false;
    for (uint32_t k = 0; k <= x->last_tok - x->first_tok; k++) {
        const struct bsl_token *s = &c->lx->toks[x->first_tok + k],
                               *t = &c->lx->toks[y->first_tok + k];
        if (s->type != t->type || s->len != t->len)
            return false;
        if (s->type == TK_IDENT || s->type == TK_KEYWORD) {
            if (s->hash != t->hash ||
                !bsl_name_eq(c->lx->src + s->off, s->len, c->lx->src + t->off, t->len))
                return false;
        } else if (memcmp(c->lx->src + s->off, c->lx->src + t->off, s->len)) {
            return false;
        }
        if (s->type == TK_OP && s->op == OP_LPAREN)
            return false; /* a call may answer something else each time */
    }
    return true;
}

void bsl_emit(struct bsl_ctx *c, enum bsl_diag_id id, struct bsl_range r, const char *fmt, ...)
{
    struct bsl_diags *d = c->out;
    if (!c->enabled[id] || d->oom)
        return;
    if (d->n >= BSL_MODULE_DIAGS_MAX) {
        d->truncated = true;
        return;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 32;
        struct bsl_diag *q = realloc(d->v, nc * sizeof(*q));
        if (!q) {
            d->oom = true;
            return;
        }
        d->v = q;
        d->cap = nc;
    }
    struct bsl_diag *g = &d->v[d->n++];
    g->id = (uint16_t)id;
    g->range = r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->msg, sizeof(g->msg), fmt, ap);
    va_end(ap);
}

void bsl_diags_free(struct bsl_diags *d)
{
    free(d->v);
    bool attributes = d->attributes;
    memset(d, 0, sizeof(*d));
    d->attributes = attributes;
}
