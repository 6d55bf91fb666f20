/* A resident shell's record (src/common/shrecord.c): finding whole records in a stream that
 * comes in pieces, splitting one, and the dump as two moments of a shell are compared. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/shrecord.h"
#include "check.h"

static void test_scan_and_split(void)
{
    /* Two records, the second not whole yet; fed a byte at a time. */
    static const char buf[] = "d0\0/w\0declare -x A='1'\n\0trap\0N \1v\0x\0/w";
    size_t len = sizeof(buf) - 1, scanned = 0, end = 0;
    int nuls = 0;
    for (size_t upto = 1; upto <= len && !end; upto++)
        end = shrecord_scan(buf, upto, &scanned, &nuls);
    CHECK(end == 34, "the first record ends after its fifth NUL (%zu)", end);
    struct shrecord r;
    shrecord_split(buf, end, &r);
    CHECK(!strcmp(r.f[0], "d0") && !strcmp(r.f[1], "/w") && r.len[2] == 17 &&
              !strcmp(r.f[3], "trap") && !strcmp(r.f[4], "N \1v"),
          "its five fields");
    nuls = 0;
    CHECK(shrecord_scan(buf, len, &scanned, &nuls) == 0 && scanned == len && nuls == 1,
          "the second is not whole: 0, its NULs counted");
    shrecord_split(buf + end, len - end, &r);
    CHECK(!strcmp(r.f[0], "x") && r.len[1] == 0 && r.len[4] == 0 && r.f[4][0] == '\0',
          "a record cut short: its whole fields, then empty ones");
}

static char *norm(const char *exports, const char *dump, bool *odd)
{
    size_t n;
    *odd = false;
    char *s = shrecord_norm(exports, strlen(exports), dump, strlen(dump), &n, odd);
    CHECK(strlen(s) == n, "length as told (%s)", s);
    return s;
}

static void test_norm(void)
{
    bool odd;
    char *a = norm("declare -x HOME='/tmp'\ndeclare -x PATH='/bin'\n",
                   "HOME IFS PATH PS4 x \1rest\nof it\n", &odd);
    CHECK(!strcmp(a, "IFS PS4 x \1rest\nof it\n") && !odd, "exported names left out: %s", a);
    free(a);
    /* A name exported in one moment and not in the other makes them differ. */
    a = norm("declare -x HOME='/tmp'\n", "HOME MOVED \1r", &odd);
    char *b = norm("declare -x HOME='/tmp'\ndeclare -x MOVED='1'\n", "HOME MOVED \1r", &odd);
    CHECK(strcmp(a, b) != 0, "export -n shows: [%s] [%s]", a, b);
    free(a);
    free(b);
    /* Prefixes are whole names, not substrings. */
    a = norm("declare -x AB='1'\ndeclare -x A='2'\n", "A AB ABC \1", &odd);
    CHECK(!strcmp(a, "ABC \1"), "A and AB out, ABC in: %s", a);
    free(a);
    static const char *const odd_exports[] = {
        "declare -rx R='1'\n",
        "declare -ix I='1'\n",
        "declare -ax A=([0]=\"1\")\n",
        "declare -x U\n",
    };
    for (size_t i = 0; i < sizeof(odd_exports) / sizeof(odd_exports[0]); i++) {
        free(norm(odd_exports[i], "R I A U \1", &odd));
        CHECK(odd, "not what a fresh bash would have: %s", odd_exports[i]);
    }
    free(norm("declare -x Q=$'a\\nb'\nnot a declaration\n", "Q \1", &odd));
    CHECK(!odd, "a value with a newline quoted, and a stray line, are no export attributes");
    a = norm("", "no separator", &odd);
    CHECK(!strcmp(a, "no separator") && !odd, "a dump without \\1 is all names: %s", a);
    free(a);
}

int main(void)
{
    test_scan_and_split();
    test_norm();
    return CHECK_DONE();
}
