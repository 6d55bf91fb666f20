/* bash's `export -p` read back (src/common/shdecl.c): each form by hand, the refusals,
 * then the real /bin/bash quoting every byte and a few awkward strings, in the C and the
 * C.UTF-8 locale, parsed back to the very same values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/common/shdecl.h"
#include "check.h"

#define VARS_MAX 300

struct got {
    int n;
    char *name[VARS_MAX], *value[VARS_MAX];
    size_t value_len[VARS_MAX];
};

static int collect(const char *name, size_t name_len, const char *value, size_t value_len,
                   void *data)
{
    struct got *g = data;
    if (g->n == VARS_MAX || strlen(name) != name_len || strlen(value) != value_len)
        return -E2BIG;
    g->name[g->n] = strdup(name);
    g->value[g->n] = strdup(value);
    g->value_len[g->n] = value_len;
    g->n++;
    return 0;
}

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->name[i]);
        free(g->value[i]);
    }
    g->n = 0;
}

static const char *find(const struct got *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->name[i], name))
            return g->value[i];
    return NULL;
}

static int parse(const char *text, struct got *g)
{
    got_free(g);
    return shdecl_parse(text, strlen(text), collect, g);
}

static void test_forms(void)
{
    struct got g = {0};
    CHECK(parse("declare -x A=\"x\\\"y\\\\z\\$w\\`q\"\n"
                "declare -ax ARR=([0]=\"1\" [1]=$'a\\nb' [2]=\")\")\n"
                "declare -x B=$'line1\\nline2\\t\\001\\377\\E\\'\\\\'\n"
                "declare -x D\n"
                "declare -x E=\"\"\n"
                "declare -rx R=\"ro\"\n"
                "declare -ix I=\"5\"\n"
                "declare -Ax MAP=([k]=\"v\" )\n"
                "export P=\"posix mode\"\n"
                "declare -x K=\"keep \\n as is\"\n",
                &g) == 0,
          "every form parses");
    CHECK(g.n == 7, "arrays and the unset one are left out (%d)", g.n);
    CHECK(find(&g, "A") && !strcmp(find(&g, "A"), "x\"y\\z$w`q"), "double quotes: %s",
          find(&g, "A"));
    CHECK(find(&g, "B") && !strcmp(find(&g, "B"), "line1\nline2\t\001\377\033'\\"),
          "ANSI-C quotes decoded");
    CHECK(find(&g, "E") && !strcmp(find(&g, "E"), ""), "empty value kept");
    CHECK(find(&g, "R") && find(&g, "I") && !strcmp(find(&g, "I"), "5"), "readonly, integer");
    CHECK(find(&g, "P") && !strcmp(find(&g, "P"), "posix mode"), "POSIX-mode export line");
    CHECK(find(&g, "K") && !strcmp(find(&g, "K"), "keep \\n as is"),
          "a backslash before anything else stays in double quotes");
    CHECK(!find(&g, "D") && !find(&g, "ARR") && !find(&g, "MAP"), "no D, ARR, MAP");

    CHECK(parse("declare -x X=$'\\x41\\x4a\\xq\\cA\\101\\q'\n", &g) == 0 && g.n == 1 &&
              !strcmp(g.value[0], "AJ\\xq\001A\\q"),
          "hex, control, octal and unknown escapes as bash reads them");
    CHECK(parse("", &g) == 0 && g.n == 0, "nothing exported");

    /* What ${V@A} writes (a resident shell's record, src/agent/spare.c). */
    CHECK(parse("declare -x S='it'\\''s \"q\" $x \\n'\n"
                "declare -x Q=''\n"
                "declare -x T=''\\''x'\\'''\n"
                "declare -ix N='3'\n",
                &g) == 0 &&
              g.n == 4,
          "single-quoted forms parse");
    CHECK(find(&g, "S") && !strcmp(find(&g, "S"), "it's \"q\" $x \\n"), "single quotes: %s",
          find(&g, "S"));
    CHECK(find(&g, "Q") && !strcmp(find(&g, "Q"), ""), "empty single quotes");
    CHECK(find(&g, "T") && !strcmp(find(&g, "T"), "'x'"), "quotes at both ends: %s",
          find(&g, "T"));
    got_free(&g);
}

static void test_refusals(void)
{
    struct got g = {0};
    static const char *const bad[] = {
        "declare -x A=\"unterminated\n",
        "declare -x A=$'unterminated\n",
        "declare -x A=\"no newline\"",
        "declare -x A=bare\n",
        "declare -x 1A=\"digit first\"\n",
        "declare -x =\"no name\"\n",
        "declare x A=\"no dash\"\n",
        "declare - A=\"\"\n",
        "typeset -x A=\"\"\n",
        "garbage\n",
        "declare -x A=$'nul \\0 inside'\n",
        "declare -x A=$'nul \\x00 inside'\n",
        "declare -x A=$'trailing backslash \\",
        "declare -x A=\"x\" trailing\n",
        "declare -ax A=([0]=\"never closed\"\n",
        "declare -x A=$'\\c",
        "declare -x A='unterminated\n",
        "declare -x A='a'b\n",
        "declare -x A=\\\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(parse(bad[i], &g) == -EINVAL, "refused: [%s]", bad[i]);
    char nul[] = "declare -x A=\"a\0b\"\n";
    got_free(&g);
    CHECK(shdecl_parse(nul, sizeof(nul) - 1, collect, &g) == -EINVAL, "a raw NUL is refused");
    got_free(&g);
}

/* What the real bash prints for env, in locale lang: `export -p`, or what a resident shell
 * writes (each exported variable's ${V@A}). */
static const char *const print_exports[] = {
    "export -p",
    "for n in ${!A*} ${!M*} ${!U*} ${!V*} ${!L*}; do [[ ${!n@a} == *x* ]] && "
    "s+=\"${!n@A}\"$'\\n'; done; printf %s \"$s\"",
};

static char *bash_export_p(char *const env[], const char *script)
{
    int p[2];
    if (pipe(p) < 0)
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execle("/bin/bash", "bash", "-c", script, (char *)NULL, env);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    ssize_t n;
    while ((n = read(p[0], out + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 4096)
            out = realloc(out, cap *= 2);
    }
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    out[len] = '\0';
    return out;
}

static void test_real_bash(const char *lang, const char *script)
{
    /* V001..V255: one byte each between two letters; ALL: every byte; a few strings. */
    static char vals[VARS_MAX][600];
    char *env[VARS_MAX + 2];
    int n = 0;
    for (int b = 1; b < 256; b++)
        snprintf(vals[n++], sizeof(vals[0]), "V%03d=a%cz", b, b);
    char *all = vals[n++];
    strcpy(all, "ALL=");
    for (int b = 1; b < 256; b++)
        all[3 + b] = (char)b;
    all[259] = '\0';
    snprintf(vals[n++], sizeof(vals[0]), "UTF=ăîșț ✓ \xe2\x80\x8b");
    snprintf(vals[n++], sizeof(vals[0]), "MIX=\"'$(x)`y`\\\n\\'\"");
    snprintf(vals[n++], sizeof(vals[0]), "%s", lang);
    for (int i = 0; i < n; i++)
        env[i] = vals[i];
    env[n] = NULL;

    char *text = bash_export_p(env, script);
    struct got g = {0};
    int r = text ? shdecl_parse(text, strlen(text), collect, &g) : -EIO;
    CHECK(r == 0, "%s, %.9s: what bash prints parses (%d)", lang, script, r);
    int same = 0;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(vals[i], '=');
        *eq = '\0';
        const char *v = find(&g, vals[i]);
        if (v && !strcmp(v, eq + 1))
            same++;
        else
            CHECK(0, "%s: %.8s came back as [%.40s]", lang, vals[i], v ? v : "(missing)");
        *eq = '=';
    }
    CHECK(same == n, "%s: all %d values came back byte for byte", lang, n);
    got_free(&g);
    free(text);
}

int main(void)
{
    test_forms();
    test_refusals();
    for (size_t i = 0; i < sizeof(print_exports) / sizeof(print_exports[0]); i++) {
        test_real_bash("LANG=C", print_exports[i]);
        test_real_bash("LANG=C.UTF-8", print_exports[i]);
    }
    return CHECK_DONE();
}
