/* Unit tests for the CLI's pure parts: the SSE parser (libsbx), relative times, sizes,
 * tables, option values, remote paths, the REPL's "needs more input" rule. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/cli.h"
#include "../../src/cli/fmt.h"
#include "../../src/lib/sse.h"
#include "check.h"

struct events {
    char got[8][128];
    int n;
    int stop_after;
};

static int on_event(void *ud, const char *data, size_t len)
{
    struct events *e = ud;
    if (e->n < 8)
        snprintf(e->got[e->n], sizeof(e->got[0]), "%.*s", (int)len, data);
    e->n++;
    return e->stop_after && e->n >= e->stop_after ? 7 : 0;
}

static void test_sse(void)
{
    static const char stream[] = ": a comment\r\n"
                                 "event: ignored\n"
                                 "data: {\"type\":\"start\"}\n\n"
                                 "data:no-space\r\n\r\n"
                                 "data: line one\n"
                                 "data: line two\n"
                                 "id: 5\n\n"
                                 "retry: 100\n\n"
                                 "data\n\n"
                                 "data: last\r\r";
    /* Every way of cutting the stream into two pieces gives the same events. */
    int all_same = 1;
    for (size_t cut = 0; cut <= sizeof(stream) - 1; cut++) {
        struct events e = {0};
        struct sse_parser p;
        sse_init(&p, on_event, &e);
        int r = sse_feed(&p, stream, cut) | sse_feed(&p, stream + cut, sizeof(stream) - 1 - cut);
        sse_release(&p);
        int same = r == 0 && e.n == 5 && !strcmp(e.got[0], "{\"type\":\"start\"}") &&
                   !strcmp(e.got[1], "no-space") && !strcmp(e.got[2], "line one\nline two") &&
                   !strcmp(e.got[3], "") && !strcmp(e.got[4], "last");
        if (!same) {
            CHECK(same, "SSE events the same when cut at %zu (got %d events)", cut, e.n);
            all_same = 0;
            break;
        }
    }
    CHECK(all_same, "SSE: comments, CRLF/CR/LF, multi-line data, other fields, any split");

    struct events e = {0};
    struct sse_parser p;
    sse_init(&p, on_event, &e);
    for (const char *c = stream; *c; c++)
        sse_feed(&p, c, 1);
    sse_release(&p);
    CHECK_EQ_INT(e.n, 5, "SSE fed one byte at a time");

    struct events s = {.stop_after = 1};
    sse_init(&p, on_event, &s);
    CHECK_EQ_INT(sse_feed(&p, "data: a\n\ndata: b\n\n", 18), 7,
                 "a callback's non-zero return stops the parser and is returned");
    CHECK_EQ_INT(s.n, 1, "no event after the stop");
    sse_release(&p);

    struct events big = {0};
    sse_init(&p, on_event, &big);
    size_t n = SSE_EVENT_MAX + 16;
    char *huge = malloc(n);
    memset(huge, 'x', n);
    memcpy(huge, "data: ", 6);
    CHECK_EQ_INT(sse_feed(&p, huge, n), -EMSGSIZE, "an event past SSE_EVENT_MAX is refused");
    free(huge);
    sse_release(&p);
}

static void test_reltime_and_bytes(void)
{
    char b[32];
    long long now = 1000000;
    static const struct {
        long long t;
        const char *want;
    } cases[] = {{1000000, "just now"}, {999999, "just now"}, {999958, "42s ago"},
                 {999700, "5m ago"},    {989200, "3h ago"},   {827200, "2d ago"},
                 {1000600, "in 10m"},   {1000001, "now"},     {1007200, "in 2h"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fmt_reltime(now, cases[i].t, b, sizeof(b));
        CHECK(!strcmp(b, cases[i].want), "reltime %lld s -> %s (got %s)", now - cases[i].t,
              cases[i].want, b);
    }
    fmt_bytes(512, b, sizeof(b));
    CHECK(!strcmp(b, "512 B"), "512 B: %s", b);
    fmt_bytes(1536, b, sizeof(b));
    CHECK(!strcmp(b, "1.5 KiB"), "1.5 KiB: %s", b);
    fmt_bytes(6LL << 20, b, sizeof(b));
    CHECK(!strcmp(b, "6.0 MiB"), "6.0 MiB: %s", b);
    fmt_bytes(3LL << 30, b, sizeof(b));
    CHECK(!strcmp(b, "3.0 GiB"), "3.0 GiB: %s", b);
}

static void test_table(void)
{
    static const char *const head[] = {"ID", "STATUS", "NOTE"};
    struct fmt_table t;
    fmt_table_init(&t, 3, head);
    const char *r1[] = {"sb_1", "running", "x"};
    const char *r2[] = {"sb_22222", NULL, "é long"};
    fmt_table_add(&t, r1);
    fmt_table_add(&t, r2);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    fmt_table_print(&t, f);
    fclose(f);
    fmt_table_release(&t);
    const char *want = "ID        STATUS   NOTE\n"
                       "sb_1      running  x\n"
                       "sb_22222  -        é long\n";
    CHECK(!strcmp(out, want), "table columns aligned, NULL as -, last column not padded:\n%s", out);
    free(out);
}

static void test_values(void)
{
    long long v = 0;
    CHECK(parse_duration("90", &v) && v == 90, "duration 90");
    CHECK(parse_duration("90s", &v) && v == 90, "duration 90s");
    CHECK(parse_duration("15m", &v) && v == 900, "duration 15m");
    CHECK(parse_duration("2h", &v) && v == 7200, "duration 2h");
    CHECK(parse_duration("1d", &v) && v == 86400, "duration 1d");
    const char *bad[] = {"", "m", "-5", "5x", "5mm", "1.5h", "99999999999999999999", "400d", " 5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!parse_duration(bad[i], &v), "duration %s refused", bad[i]);
    CHECK(parse_int("5", 1, 5, &v) && v == 5, "int 5 in 1..5");
    CHECK(!parse_int("6", 1, 5, &v) && !parse_int("0x1", 0, 9, &v) && !parse_int("", 0, 9, &v),
          "ints out of range or not decimal refused");

    char *name = NULL;
    const char *value = NULL;
    CHECK(parse_env_pair("A=b=c", &name, &value) && !strcmp(name, "A") && !strcmp(value, "b=c"),
          "env pair splits at the first =");
    free(name);
    CHECK(parse_env_pair("EMPTY=", &name, &value) && !strcmp(value, ""), "env value may be empty");
    free(name);
    CHECK(!parse_env_pair("NOEQ", &name, &value) && !parse_env_pair("=x", &name, &value),
          "env pair without a name or = refused");

    CHECK(!strcmp(lang_from_path("dir.v2/job.py"), "python"), "job.py is python");
    CHECK(!strcmp(lang_from_path("run.sh"), "bash") && !strcmp(lang_from_path("a.mjs"), "node"),
          ".sh bash, .mjs node");
    CHECK(!lang_from_path("Makefile") && !lang_from_path(".py") && !lang_from_path("x.txt"),
          "no or unknown extension: no language");
}

static void test_remote(void)
{
    char *id = NULL, *path = NULL;
    CHECK(parse_remote("sb_1:in/a.txt", &id, &path) && !strcmp(id, "sb_1") &&
              !strcmp(path, "in/a.txt"),
          "ID:PATH");
    free(id), free(path);
    CHECK(parse_remote("sb_1:/workspace/in/a", &id, &path) && !strcmp(path, "in/a"),
          "ID:/workspace/PATH is the same as ID:PATH");
    free(id), free(path);
    CHECK(parse_remote("sb_1:", &id, &path) && !strcmp(path, ""), "ID: is the workspace");
    free(id), free(path);
    CHECK(!parse_remote("./a:b", &id, &path) && !parse_remote("dir/a:b", &id, &path) &&
              !parse_remote("plain", &id, &path) && !parse_remote(":x", &id, &path),
          "local paths (a slash before the colon, ./, no colon) are local");

    CHECK(cli_safe_relpath("a/b.txt") && cli_safe_relpath("x"), "plain relative paths are safe");
    const char *bad[] = {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", "."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!cli_safe_relpath(bad[i]), "%s is not safe below a directory", bad[i]);
}

static void test_needs_more(void)
{
    static const struct {
        const char *src;
        bool more;
    } cases[] = {
        {"x = 1\n", false},
        {"f(1,\n", true},
        {"[1,\n 2]\n", false},
        {"def f():\n", true},
        {"def f():\n    return 1\n", true},
        {"def f():\n    return 1\n\n", false},
        {"if x:  # comment\n", true},
        {"s = '''abc\n", true},
        {"s = '''abc\n'''\n", false},
        {"d = {'a': '('}\n", false},
        {"x = 1 + \\\n", true},
        {"# just (a comment\n", false},
        {"@decorator\n", true},
        {"print(\"a:\")\n", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK(code_needs_more(cases[i].src) == cases[i].more, "needs more input: %s for %s",
              cases[i].more ? "yes" : "no", cases[i].src);
}

int main(void)
{
    test_sse();
    test_reltime_and_bytes();
    test_table();
    test_values();
    test_remote();
    test_needs_more();
    return CHECK_DONE();
}
