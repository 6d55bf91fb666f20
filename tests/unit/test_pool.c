/* SBX_WARM_POOL's grammar (templates/pool.c): what starts a daemon and what stops it. */
#include "../../src/daemon/templates/pool.h"

#include <errno.h>
#include <string.h>

#include "check.h"

static int parse(const char *text, struct pool_spec *out, size_t *n, struct sbx_err *err)
{
    memset(err, 0, sizeof(*err));
    return pool_spec_parse(text, out, n, err);
}

int main(void)
{
    struct pool_spec s[POOL_TEMPLATES_MAX];
    size_t n;
    struct sbx_err err;

    CHECK(parse("base:2,office:1", s, &n, &err) == 0, "two pools parse");
    CHECK_EQ_INT((int)n, 2, "two entries");
    CHECK(!strcmp(s[0].name, "base") && s[0].size == 2, "base:2");
    CHECK(!strcmp(s[1].name, "office") && s[1].size == 1, "office:1");
    CHECK(parse("", s, &n, &err) == 0 && n == 0, "empty: no pools");
    CHECK(parse("base:0", s, &n, &err) == 0 && n == 1 && s[0].size == 0, "size 0 is allowed");
    CHECK(parse("base:16", s, &n, &err) == 0 && s[0].size == POOL_SIZE_MAX, "the maximum");

    static const char *const bad[] = {
        "base",    "base:",         "base:x",
        "base:2x", "base:-1",       "base:17",
        ":2",      "Base:1",        "../x:1",
        "a b:1",   "base:1,base:2", "a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = parse(bad[i], s, &n, &err);
        CHECK(r == -EINVAL && !strcmp(err.code, "invalid_config") && err.msg[0], "rejected: '%s'",
              bad[i]);
    }
    char longspec[POOL_SPEC_MAX + 8];
    memset(longspec, 'a', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    CHECK(parse(longspec, s, &n, &err) == -EINVAL, "too long");
    return CHECK_DONE();
}
