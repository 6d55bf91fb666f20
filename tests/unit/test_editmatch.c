/* edit_file's matching steps (src/daemon/tools/editmatch.c): exact, trailing-whitespace,
 * indentation (with re-indent), similarity (with its score), the refusals and the diff. */
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/tools/editmatch.h"
#include "check.h"

static int edit(const char *text, const char *old_s, const char *new_s, bool all,
                struct edit_match *m, struct sbx_err *err)
{
    memset(err, 0, sizeof(*err));
    return edit_replace(text, strlen(text), old_s, new_s, all, m, err);
}

#define CHECK_TEXT(m, want, what)                                                                  \
    CHECK((m).text && !strcmp((m).text, (want)), "%s: got [%s]", what, (m).text ? (m).text : "")

static void test_exact(void)
{
    struct edit_match m;
    struct sbx_err err;
    CHECK(edit("a = 1\nb = 2\n", "b = 2", "b = 3", false, &m, &err) == 0, "exact: ok");
    CHECK_TEXT(m, "a = 1\nb = 3\n", "exact: replaced");
    CHECK(m.strategy == EDIT_EXACT && m.replacements == 1 && m.first_line == 2,
          "exact: strategy, count, line");
    edit_match_clear(&m);

    CHECK(edit("x\ny\nx\n", "x", "z", false, &m, &err) < 0, "exact twice: refused");
    CHECK(!strcmp(err.code, "edit_not_unique"), "exact twice: edit_not_unique (%s)", err.code);
    CHECK(m.ncand == 2 && m.cand[0].line == 1 && m.cand[1].line == 3,
          "exact twice: candidates at lines 1 and 3");
    CHECK(strstr(err.msg, "lines 1, 3") != NULL, "exact twice: message names the lines: %.80s",
          err.msg);
    edit_match_clear(&m);

    CHECK(edit("x\ny\nx\n", "x", "z", true, &m, &err) == 0, "replace_all: ok");
    CHECK_TEXT(m, "z\ny\nz\n", "replace_all: both replaced");
    CHECK_EQ_INT(m.replacements, 2, "replace_all: two replacements");
    edit_match_clear(&m);

    CHECK(edit("abc", "", "x", false, &m, &err) < 0 && !strcmp(err.code, "invalid_request"),
          "empty old_string refused");
    edit_match_clear(&m);
}

static void test_trailing_ws(void)
{
    struct edit_match m;
    struct sbx_err err;
    const char *text = "def f():  \n    return 1\t\nend\n";
    CHECK(edit(text, "def f():\n    return 1\n", "def f():\n    return 2\n", false, &m, &err) == 0,
          "trailing ws: ok (%.80s)", err.msg);
    CHECK(m.strategy == EDIT_TRAILING_WS, "trailing ws: strategy %s",
          edit_strategy_name(m.strategy));
    CHECK_TEXT(m, "def f():\n    return 2\nend\n", "trailing ws: replaced whole lines");
    CHECK_EQ_INT(m.first_line, 1, "trailing ws: first line");
    edit_match_clear(&m);

    CHECK(edit("a \nq\na\t\n", "a\n", "b\n", false, &m, &err) < 0 &&
              !strcmp(err.code, "edit_not_unique") && m.ncand == 2 && m.cand[1].line == 3,
          "trailing ws twice: refused with lines 1 and 3");
    edit_match_clear(&m);
}

static void test_indent(void)
{
    struct edit_match m;
    struct sbx_err err;
    const char *text = "class A:\n        def g(self):\n            return 1\n";
    /* The agent copied the method with 4 spaces; the file has 8. */
    CHECK(edit(text, "def g(self):\n    return 1", "def g(self):\n    x = 2\n    return x", false,
               &m, &err) == 0,
          "indent: ok (%.80s)", err.msg);
    CHECK(m.strategy == EDIT_INDENT, "indent: strategy %s", edit_strategy_name(m.strategy));
    CHECK_TEXT(m, "class A:\n        def g(self):\n            x = 2\n            return x\n",
               "indent: replacement re-indented to the file's indentation");
    CHECK_EQ_INT(m.first_line, 2, "indent: first line");
    edit_match_clear(&m);

    /* Tabs in the file, spaces in the request. */
    CHECK(edit("if x:\n\tcall()\n", "  call()\n", "  other()\n  more()\n", false, &m, &err) == 0,
          "indent tabs: ok");
    CHECK_TEXT(m, "if x:\n\tother()\n\tmore()\n", "indent tabs: replacement uses the tab");
    edit_match_clear(&m);
}

static void test_similar(void)
{
    struct edit_match m;
    struct sbx_err err;
    const char *text = "one\n"
                       "def compute(a, b):\n"
                       "    total = a + b\n"
                       "    return total\n"
                       "two\n";
    /* One identifier drifted since the agent read the file. */
    CHECK(edit(text, "def compute(a, b):\n    totl = a + b\n    return total\n",
               "def compute(a, b):\n    return a + b\n", false, &m, &err) == 0,
          "similar: ok (%.80s)", err.msg);
    CHECK(m.strategy == EDIT_SIMILAR, "similar: strategy %s", edit_strategy_name(m.strategy));
    CHECK(m.score >= EDIT_SIMILARITY_MIN && m.score < 1.0, "similar: score %.3f reported", m.score);
    CHECK_TEXT(m, "one\ndef compute(a, b):\n    return a + b\ntwo\n", "similar: replaced window");
    CHECK_EQ_INT(m.first_line, 2, "similar: first line");
    edit_match_clear(&m);

    /* Too far from anything: refused with the nearest candidates. */
    CHECK(edit(text, "class Totally(Different):\n    pass\n", "x", false, &m, &err) < 0,
          "below threshold: refused");
    CHECK(!strcmp(err.code, "edit_no_match"), "below threshold: edit_no_match (%s)", err.code);
    CHECK(m.ncand >= 1 && m.cand[0].score < EDIT_SIMILARITY_MIN && m.cand[0].line >= 1,
          "below threshold: nearest candidate with line and score");
    CHECK(strstr(err.msg, "similarity") != NULL, "below threshold: message: %.80s", err.msg);
    edit_match_clear(&m);

    /* Two equally near windows: ambiguous. */
    const char *twice = "value = compute(1)\nx\nvalue = compute(2)\ny\n";
    CHECK(edit(twice, "value = compute(3)\n", "v\n", false, &m, &err) < 0 &&
              !strcmp(err.code, "edit_not_unique") && m.ncand >= 2,
          "similar twice: refused as not unique (%s)", err.code);
    CHECK(m.cand[0].line == 1 || m.cand[0].line == 3, "similar twice: candidate lines");
    edit_match_clear(&m);

    size_t cells = 0;
    CHECK(edit_similarity("kitten", 6, "sitting", 7, &cells) > 0.57 &&
              edit_similarity("kitten", 6, "sitting", 7, NULL) < 0.58 && cells == 42,
          "similarity of kitten/sitting is 4/7 and costs 42 cells");
    CHECK(edit_similarity("", 0, "", 0, NULL) == 1.0, "similarity of two empty strings is 1");
}

static void test_no_match_small(void)
{
    struct edit_match m;
    struct sbx_err err;
    CHECK(edit("a\n", "b\nc\nd\n", "x", false, &m, &err) < 0 && !strcmp(err.code, "edit_no_match"),
          "old longer than the file: edit_no_match");
    edit_match_clear(&m);
    CHECK(edit("a\n", "  \n", "x", false, &m, &err) < 0 && !strcmp(err.code, "edit_no_match"),
          "whitespace-only old_string without exact match: edit_no_match");
    edit_match_clear(&m);
}

static void test_diff(void)
{
    const char *a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
    const char *b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
    char *d = edit_unified_diff("f.txt", a, strlen(a), b, strlen(b));
    CHECK(d && !strcmp(d, "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n"
                          " 7\n 8\n"),
          "diff: one hunk with 3 lines of context: [%s]", d);
    free(d);
    d = edit_unified_diff("f", "x", 1, "x", 1);
    CHECK(d && !*d, "diff of equal texts is empty");
    free(d);
    d = edit_unified_diff("f", "", 0, "new\n", 4);
    CHECK(d && !strcmp(d, "--- a/f\n+++ b/f\n@@ -0,0 +1,1 @@\n+new\n"), "diff: created file [%s]",
          d);
    free(d);
    d = edit_unified_diff("f", "a\nb", 3, "a\nc", 3);
    CHECK(d && strstr(d, "+c\n\\ No newline at end of file\n") != NULL,
          "diff: marks a missing final newline [%s]", d);
    free(d);
}

int main(void)
{
    test_exact();
    test_trailing_ws();
    test_indent();
    test_similar();
    test_no_match_small();
    test_diff();
    return CHECK_DONE();
}
