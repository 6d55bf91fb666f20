/* libFuzzer target for sbx-bsl's lexer, parser and diagnostics (src/bsl/): a module's text
 * is whatever a workspace holds, so any bytes.
 *
 * Invariants: analysis never fails but for memory; every token lies in the input, in order,
 * with 1-based positions that never go back; every diagnostic has a known code and a range
 * whose start is not after its end, on a line the module has; the JSON report of the result
 * parses and counts as many diagnostics as were found. Work stays linear-ish (the -timeout
 * of the run catches a runaway).
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/bsl/diag.h"
#include "../../src/bsl/report.h"
#include "fuzz.h"

static int pos_le(struct bsl_pos a, struct bsl_pos b)
{
    return a.line < b.line || (a.line == b.line && a.col <= b.col);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    const char *src = (const char *)data;
    struct bsl_err err = {0};
    struct bsl_lexed lx;
    REQUIRE(bsl_lex(src, size, &lx, &err) == 0);
    REQUIRE(lx.ntoks >= 1 && lx.toks[lx.ntoks - 1].type == TK_EOF);
    for (size_t i = 0; i < lx.ntoks; i++) {
        const struct bsl_token *t = &lx.toks[i];
        REQUIRE((size_t)t->off + t->len <= size);
        REQUIRE(t->start.line >= 1 && t->start.col >= 1 && pos_le(t->start, t->end));
        REQUIRE(t->end.line <= lx.nlines);
        if (i)
            REQUIRE(pos_le(lx.toks[i - 1].end, t->start) && lx.toks[i - 1].off < t->off + 1);
    }
    struct bsl_tree tree;
    REQUIRE(bsl_parse(&lx, &tree, &err) == 0);
    for (size_t i = 0; i < tree.nnodes; i++)
        REQUIRE(tree.nodes[i].first_tok < lx.ntoks && tree.nodes[i].last_tok < lx.ntoks);
    bool all[D_COUNT_];
    for (int i = 0; i < D_COUNT_; i++)
        all[i] = true;
    struct bsl_diags d = {0};
    REQUIRE(bsl_diagnose(&lx, &tree, all, &d, &err) == 0);
    for (size_t i = 0; i < d.n; i++) {
        REQUIRE(d.v[i].id < D_COUNT_);
        REQUIRE(pos_le(d.v[i].range.start, d.v[i].range.end));
        REQUIRE(d.v[i].range.start.line >= 1 && d.v[i].range.start.line <= lx.nlines);
        REQUIRE(memchr(d.v[i].msg, 0, sizeof(d.v[i].msg)));
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    struct bsl_report r;
    bsl_report_begin(&r, f, BSL_FORMAT_JSON, BSL_RESULTS_MAX, "/workspace");
    bsl_report_file(&r, "/workspace/m.bsl", &d, lx.nlines);
    REQUIRE(bsl_report_end(&r) == 0);
    fclose(f);
    json_error_t jerr;
    json_t *doc = json_loadb(buf, len, 0, &jerr);
    REQUIRE(doc);
    json_t *s = json_object_get(json_object_get(doc, "summary"), "diagnostics");
    REQUIRE(json_integer_value(s) == (json_int_t)d.n);
    json_decref(doc);
    free(buf);
    bsl_diags_free(&d);
    bsl_tree_free(&tree);
    bsl_lexed_free(&lx);
    return 0;
}
