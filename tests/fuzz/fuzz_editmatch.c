/* libFuzzer target for edit_file's matching (src/daemon/tools/editmatch.c): an agent's
 * old_string and new_string against a file's text, all untrusted.
 *
 * Input: text, old_string and new_string separated by NUL bytes; byte 0 chooses
 * replace_all. Invariants: a success gives a NUL-terminated text of the stated length
 * with at least one replacement (exactly one without replace_all), an exact match keeps
 * what precedes and follows the first occurrence, and a refusal is edit_no_match or
 * edit_not_unique with at most EDIT_CANDIDATES_MAX candidates on real lines; the unified
 * diff of the change is "" exactly when nothing changed. Work stays bounded by
 * EDIT_FUZZY_BUDGET (the -timeout of the run catches a runaway search).
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/tools/editmatch.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 64 * 1024)
        return 0;
    bool all = data[0] & 1;
    char *buf = calloc(1, size + 2);
    memcpy(buf, data + 1, size - 1);
    const char *text = buf;
    size_t tlen = strlen(text);
    const char *old_s = text + tlen + 1;
    const char *new_s = old_s + strlen(old_s) + (old_s < buf + size ? 1 : 0);
    if (!*old_s || new_s > buf + size) {
        free(buf);
        return 0;
    }
    struct edit_match m;
    struct sbx_err err = {0};
    size_t lines = 1;
    for (size_t i = 0; i < tlen; i++)
        lines += text[i] == '\n';
    if (edit_replace(text, tlen, old_s, new_s, all, &m, &err) == 0) {
        REQUIRE(m.text && strlen(m.text) == m.len);
        REQUIRE(m.replacements >= 1 && (all || m.replacements == 1));
        REQUIRE(m.first_line >= 1 && m.first_line <= lines);
        REQUIRE(m.strategy != EDIT_SIMILAR || (m.score >= EDIT_SIMILARITY_MIN && m.score <= 1));
        if (m.strategy == EDIT_EXACT) {
            const char *at = strstr(text, old_s);
            REQUIRE(at);
            size_t pre = (size_t)(at - text);
            REQUIRE(m.len >= pre && !memcmp(m.text, text, pre));
            if (!all) {
                size_t olen = strlen(old_s), nlen = strlen(new_s);
                REQUIRE(m.len == tlen - olen + nlen);
                REQUIRE(!memcmp(m.text + pre, new_s, nlen));
                REQUIRE(!strcmp(m.text + pre + nlen, at + olen));
            }
        }
        char *diff = edit_unified_diff("f", text, tlen, m.text, m.len);
        REQUIRE(diff && (!*diff == (m.len == tlen && !memcmp(m.text, text, tlen))));
        free(diff);
    } else {
        REQUIRE(!strcmp(err.code, "edit_no_match") || !strcmp(err.code, "edit_not_unique"));
        REQUIRE(m.ncand <= EDIT_CANDIDATES_MAX);
        for (size_t i = 0; i < m.ncand; i++)
            REQUIRE(m.cand[i].line >= 1 && m.cand[i].line <= lines &&
                    strlen(m.cand[i].snippet) <= EDIT_SNIPPET_MAX);
    }
    edit_match_clear(&m);
    free(buf);
    return 0;
}
