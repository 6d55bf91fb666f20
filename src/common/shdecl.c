#include "shdecl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct cur {
    const char *p, *end;
};

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

static bool eat(struct cur *c, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n))
        return false;
    c->p += n;
    return true;
}

/* After the opening '"': bash's double quoting, where a backslash escapes only $ ` " \
 * and a newline. out (NULL: skip) has room for what is left of the text. */
static int dquoted(struct cur *c, char *out, size_t *out_len)
{
    size_t n = 0;
    while (c->p < c->end) {
        char ch = *c->p++;
        if (ch == '"') {
            *out_len = n;
            return 0;
        }
        if (ch == '\\' && c->p < c->end) {
            char next = *c->p;
            if (next == '\n') {
                c->p++;
                continue;
            }
            if (next == '$' || next == '`' || next == '"' || next == '\\') {
                ch = next;
                c->p++;
            }
        }
        if (ch == '\0')
            return -EINVAL;
        if (out)
            out[n] = ch;
        n++;
    }
    return -EINVAL;
}

static int octal(char c)
{
    return c >= '0' && c <= '7' ? c - '0' : -1;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One escape after a backslash in $'...', as bash reads it back; *two: an unknown one,
 * kept as the backslash and the character. */
static int ansi_escape(struct cur *c, unsigned char *ch, bool *two)
{
    /* Pairs: the letter after the backslash, the byte it stands for. */
    static const char simple[] = "a\ab\be\033E\033f\fn\nr\rt\tv\v\\\\''\"\"??";
    *two = false;
    if (c->p >= c->end)
        return -EINVAL;
    char e = *c->p++;
    for (size_t i = 0; i + 1 < sizeof(simple); i += 2)
        if (simple[i] == e) {
            *ch = (unsigned char)simple[i + 1];
            return 0;
        }
    int v = 0, k = 0;
    if (e == 'c') {
        if (c->p >= c->end)
            return -EINVAL;
        *ch = (unsigned char)(*c->p++ & 0x1f);
    } else if (e == 'x') {
        for (; k < 2 && c->p < c->end && hex(*c->p) >= 0; k++)
            v = v * 16 + hex(*c->p++);
        *two = k == 0; /* "\\x" without digits stays as it is */
        *ch = k ? (unsigned char)v : 'x';
    } else if (octal(e) >= 0) {
        for (v = octal(e), k = 1; k < 3 && c->p < c->end && octal(*c->p) >= 0; k++)
            v = v * 8 + octal(*c->p++);
        *ch = (unsigned char)(v & 0xff);
    } else {
        *two = true;
        *ch = (unsigned char)e;
    }
    return 0;
}

/* After the opening "$'": bash's ANSI-C quoting. Decoding never lengthens the text. */
static int ansi(struct cur *c, char *out, size_t *out_len)
{
    size_t n = 0;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p++;
        bool two = false;
        if (ch == '\'') {
            *out_len = n;
            return 0;
        }
        if (ch == '\\' && ansi_escape(c, &ch, &two) < 0)
            return -EINVAL;
        if (ch == '\0')
            return -EINVAL;
        if (two) {
            if (out)
                out[n] = '\\';
            n++;
        }
        if (out)
            out[n] = (char)ch;
        n++;
    }
    return -EINVAL;
}

/* Single quotes as `${V@A}` writes them: 'a'\''b' is a'b. Decoding never lengthens the
 * text. */
static int squoted(struct cur *c, char *out, size_t *out_len)
{
    size_t n = 0;
    bool any = false;
    for (;;) {
        if (eat(c, "\\'")) {
            if (out)
                out[n] = '\'';
            n++;
        } else if (eat(c, "'")) {
            const char *q = memchr(c->p, '\'', (size_t)(c->end - c->p));
            if (!q || memchr(c->p, '\0', (size_t)(q - c->p)))
                return -EINVAL;
            if (out)
                memcpy(out + n, c->p, (size_t)(q - c->p));
            n += (size_t)(q - c->p);
            c->p = q + 1;
        } else {
            break;
        }
        any = true;
    }
    *out_len = n;
    return any ? 0 : -EINVAL;
}

/* After the '(' of an array's value: its quoted elements, up to the closing ')'. */
static int skip_array(struct cur *c)
{
    size_t ignored;
    while (c->p < c->end) {
        if (eat(c, ")"))
            return 0;
        int r = 0;
        if (eat(c, "\""))
            r = dquoted(c, NULL, &ignored);
        else if (eat(c, "$'"))
            r = ansi(c, NULL, &ignored);
        else
            c->p++;
        if (r < 0)
            return r;
    }
    return -EINVAL;
}

static int parse_line(struct cur *c, char *name, char *value, shdecl_fn fn, void *data)
{
    bool array = false;
    if (eat(c, "declare -")) {
        const char *flags = c->p;
        while (c->p < c->end && (name_start(*c->p) || *c->p == '-'))
            c->p++;
        size_t n = (size_t)(c->p - flags);
        if (n == 0 || !eat(c, " "))
            return -EINVAL;
        array = memchr(flags, 'a', n) || memchr(flags, 'A', n);
    } else if (!eat(c, "export ")) {
        return -EINVAL;
    }
    const char *start = c->p;
    if (c->p >= c->end || !name_start(*c->p))
        return -EINVAL;
    while (c->p < c->end && name_char(*c->p))
        c->p++;
    size_t name_len = (size_t)(c->p - start);
    if (eat(c, "\n"))
        return 0; /* exported but never set: not in a child's environment */
    if (!eat(c, "="))
        return -EINVAL;
    size_t value_len = 0;
    int r;
    if (eat(c, "\""))
        r = dquoted(c, value, &value_len);
    else if (eat(c, "$'"))
        r = ansi(c, value, &value_len);
    else if (eat(c, "("))
        r = skip_array(c), array = true;
    else if (c->p < c->end && (*c->p == '\'' || *c->p == '\\'))
        r = squoted(c, value, &value_len);
    else
        r = -EINVAL;
    if (r < 0 || !eat(c, "\n"))
        return -EINVAL;
    if (array)
        return 0; /* bash does not pass arrays to a child */
    memcpy(name, start, name_len);
    name[name_len] = '\0';
    value[value_len] = '\0';
    return fn(name, name_len, value, value_len, data);
}

int shdecl_parse(const char *text, size_t len, shdecl_fn fn, void *data)
{
    struct cur c = {text, text + len};
    /* A name or a decoded value is never longer than the text it came from. */
    _cleanup_free_ char *name = sbx_xmalloc(len + 1);
    _cleanup_free_ char *value = sbx_xmalloc(len + 1);
    while (c.p < c.end) {
        int r = parse_line(&c, name, value, fn, data);
        if (r < 0)
            return r;
    }
    return 0;
}
