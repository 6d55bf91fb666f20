#include "fmt.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

void fmt_reltime(long long now, long long t, char *buf, size_t n)
{
    long long d = now - t;
    bool ahead = d < 0;
    if (ahead)
        d = -d;
    if (d < 2) {
        snprintf(buf, n, ahead ? "now" : "just now");
        return;
    }
    static const struct {
        long long secs;
        const char *unit;
    } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(units); i++) {
        if (d >= units[i].secs) {
            long long v = d / units[i].secs;
            if (ahead)
                snprintf(buf, n, "in %lld%s", v, units[i].unit);
            else
                snprintf(buf, n, "%lld%s ago", v, units[i].unit);
            return;
        }
    }
}

void fmt_bytes(long long b, char *buf, size_t n)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (b < 1024) {
        snprintf(buf, n, "%lld B", b);
        return;
    }
    double v = (double)b / 1024;
    size_t i = 0;
    while (v >= 1024 && i + 1 < SBX_ARRAY_SIZE(units)) {
        v /= 1024;
        i++;
    }
    snprintf(buf, n, "%.1f %s", v, units[i]);
}

void fmt_table_init(struct fmt_table *t, size_t ncols, const char *const *header)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols < FMT_TABLE_COLS ? ncols : FMT_TABLE_COLS;
    fmt_table_add(t, header);
}

void fmt_table_add(struct fmt_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = sbx_xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
    }
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = sbx_xstrdup(cells[i] ? cells[i] : "-");
    t->nrows++;
}

static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

void fmt_table_print(const struct fmt_table *t, FILE *f)
{
    size_t w[FMT_TABLE_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t cw = width(t->cells[r * t->ncols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols) {
                fputs(s, f);
                break;
            }
            fprintf(f, "%s%*s", s, (int)(w[c] - width(s) + 2), "");
        }
        fputc('\n', f);
    }
}

void fmt_table_release(struct fmt_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

bool parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool parse_duration(const char *s, long long *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno)
        return false;
    long long mult = 1;
    if (*end) {
        if (end[1])
            return false;
        switch (*end) {
        case 's':
            mult = 1;
            break;
        case 'm':
            mult = 60;
            break;
        case 'h':
            mult = 3600;
            break;
        case 'd':
            mult = 86400;
            break;
        default:
            return false;
        }
    }
    if (v > 366LL * 86400 / mult)
        return false;
    *out = v * mult;
    return true;
}

bool parse_env_pair(const char *s, char **name, const char **value)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return false;
    *name = sbx_xasprintf("%.*s", (int)(eq - s), s);
    *value = eq + 1;
    return true;
}

const char *lang_from_path(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base)
        return NULL;
    static const struct {
        const char *ext, *lang;
    } map[] = {{".py", "python"}, {".sh", "bash"},  {".bash", "bash"},
               {".js", "node"},   {".mjs", "node"}, {".cjs", "node"}};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++)
        if (!strcmp(dot, map[i].ext))
            return map[i].lang;
    return NULL;
}

bool parse_remote(const char *s, char **id, char **path)
{
    const char *colon = strchr(s, ':');
    const char *slash = strchr(s, '/');
    if (!colon || colon == s || (slash && slash < colon) || s[0] == '.')
        return false;
    *id = sbx_xasprintf("%.*s", (int)(colon - s), s);
    const char *p = colon + 1;
    while (*p == '/')
        p++;
    /* Remote paths are relative to /workspace; accept the absolute spelling too. */
    if (!strncmp(p, "workspace", 9) && (p[9] == '/' || !p[9]) && colon[1] == '/')
        p += p[9] ? 10 : 9;
    *path = sbx_xstrdup(p);
    return true;
}

/* Is the input so far a whole statement? Open brackets, an open triple-quoted string,
 * a trailing backslash, or a block (a first line ending in ':') that has not been
 * closed by an empty line all ask for more, as Python's own prompt does. */
bool code_needs_more(const char *src)
{
    int depth = 0;
    char quote = 0;
    bool triple = false;
    const char *p = src;
    for (; *p; p++) {
        if (quote) {
            if (*p == '\\' && p[1]) {
                p++;
            } else if (triple && *p == quote && p[1] == quote && p[2] == quote) {
                quote = 0;
                p += 2;
            } else if (!triple && *p == quote) {
                quote = 0;
            } else if (!triple && *p == '\n') {
                quote = 0; /* an unterminated one-line string: Python reports it */
            }
            continue;
        }
        if (*p == '#') {
            while (p[1] && p[1] != '\n')
                p++;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
            triple = p[1] == *p && p[2] == *p;
            if (triple)
                p += 2;
        } else if (strchr("([{", *p)) {
            depth++;
        } else if (strchr(")]}", *p) && depth > 0) {
            depth--;
        }
    }
    if ((quote && triple) || depth > 0)
        return true;
    size_t n = strlen(src);
    while (n && src[n - 1] == '\n')
        n--;
    if (n && src[n - 1] == '\\')
        return true;
    /* A block: its first line ends with ':' (before a comment) or is a decorator; it
     * ends at an empty line. */
    const char *nl = strchr(src, '\n');
    size_t first = nl ? (size_t)(nl - src) : strlen(src);
    const char *hash = memchr(src, '#', first);
    size_t end = hash ? (size_t)(hash - src) : first;
    while (end && (src[end - 1] == ' ' || src[end - 1] == '\t'))
        end--;
    bool block = (end && src[end - 1] == ':') || src[0] == '@';
    if (!block)
        return false;
    size_t len = strlen(src);
    return !(len >= 2 && src[len - 1] == '\n' && src[len - 2] == '\n');
}
