#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const lsp_names[4] = {"Error", "Warning", "Information", "Hint"};

static int lsp_index(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(lsp_names[i], name))
            return i;
    return 3;
}

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs, surrogates
 * or code points past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

void bsl_json_string(FILE *out, const char *s, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '\r')
            fputs("\\r", out);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, out);
        else {
            /* a valid UTF-8 sequence goes as it is; any other byte as U+FFFD */
            size_t n = utf8_len((const unsigned char *)s + i, len - i);
            bool ok = n > 0;
            if (ok) {
                fwrite(s + i, 1, n, out);
                i += n - 1;
            } else {
                fputs("\\ufffd", out);
            }
        }
    }
    fputc('"', out);
}

static void jstr(FILE *out, const char *s)
{
    bsl_json_string(out, s, strlen(s));
}

void bsl_report_begin(struct bsl_report *r, FILE *out, enum bsl_format format, size_t max_results,
                      const char *source_dir)
{
    memset(r, 0, sizeof(*r));
    r->out = out;
    r->format = format;
    r->max_results = max_results;
    if (format != BSL_FORMAT_JSON)
        return;
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "{\"date\":\"%s\",\"source\":\"sbx-bsl\",\"sourceDir\":", date);
    jstr(out, source_dir ? source_dir : "");
    fputs(",\"fileinfos\":[", out);
}

static void json_pos(FILE *out, struct bsl_pos p)
{
    /* LSP positions, 0-based, as bsl-language-server writes them */
    fprintf(out, "{\"line\":%u,\"character\":%u}", p.line ? p.line - 1 : 0, p.col ? p.col - 1 : 0);
}

static void text_diag(FILE *m, const char *path, const struct bsl_diag *g)
{
    fprintf(m, "%s:%u:%u: %s %s: %s\n", path, g->range.start.line, g->range.start.col,
            bsl_lsp_severity(g->id), bsl_diag_info(g->id)->code, g->msg);
}

static void json_diag(FILE *m, const struct bsl_diag *g, bool first)
{
    const struct bsl_diag_info *info = bsl_diag_info(g->id);
    fputs(first ? "\n {\"range\":{\"start\":" : ",\n {\"range\":{\"start\":", m);
    json_pos(m, g->range.start);
    fputs(",\"end\":", m);
    json_pos(m, g->range.end);
    fprintf(m,
            "},\"severity\":\"%s\",\"code\":\"%s\",\"source\":\"sbx-bsl\","
            "\"message\":",
            bsl_lsp_severity(g->id), info->code);
    jstr(m, g->msg);
    fprintf(m,
            ",\"line\":%u,\"column\":%u,\"endLine\":%u,\"endColumn\":%u,"
            "\"bslSeverity\":\"%s\",\"type\":\"%s\"}",
            g->range.start.line, g->range.start.col, g->range.end.line, g->range.end.col,
            bsl_severity_name(info->severity),
            info->type == DT_ERROR           ? "ERROR"
            : info->type == DT_VULNERABILITY ? "VULNERABILITY"
                                             : "CODE_SMELL");
}

void bsl_report_file(struct bsl_report *r, const char *path, const struct bsl_diags *d,
                     size_t lines)
{
    r->files++;
    if (d->n)
        r->files_with++;
    for (size_t i = 0; i < d->n; i++) {
        r->total++;
        r->by_lsp[lsp_index(bsl_lsp_severity(d->v[i].id))]++;
        r->by_code[d->v[i].id]++;
    }
    if (d->truncated)
        r->truncated = true;
    if (!d->n)
        return;
    size_t room = r->written < r->max_results ? r->max_results - r->written : 0;
    size_t n = d->n < room ? d->n : room;
    if (n < d->n)
        r->truncated = true;
    if (!n)
        return;
    FILE *out = r->out;
    size_t w = 0;
    for (; w < n; w++) {
        /* each entry rendered first, so the report stops whole within max_bytes */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m)
            break;
        if (r->format == BSL_FORMAT_TEXT)
            text_diag(m, path, &d->v[w]);
        else
            json_diag(m, &d->v[w], w == 0);
        fclose(m);
        size_t head = r->format == BSL_FORMAT_JSON && w == 0 ? strlen(path) * 6 + 64 : 0;
        if (r->max_bytes && r->bytes + head + len + BSL_REPORT_TAIL_BYTES > r->max_bytes) {
            free(buf);
            r->truncated = true;
            break;
        }
        if (r->format == BSL_FORMAT_JSON && w == 0) {
            long before = ftell(out);
            fputs(r->any_file ? ",\n{\"path\":" : "\n{\"path\":", out);
            r->any_file = true;
            jstr(out, path);
            fputs(",\"mdoRef\":\"\",\"diagnostics\":[", out);
            long after = ftell(out);
            r->bytes += before >= 0 && after >= before ? (size_t)(after - before) : head;
        }
        fwrite(buf, 1, len, out);
        r->bytes += len;
        free(buf);
    }
    if (r->format == BSL_FORMAT_JSON && w > 0) {
        int k = fprintf(out, "],\"metrics\":{\"lines\":%zu}}", lines);
        r->bytes += k > 0 ? (size_t)k : 0;
    }
    r->written += w;
}

void bsl_report_error(struct bsl_report *r, const char *path, const char *msg)
{
    r->failed++;
    if (r->nerrors < BSL_REPORT_ERRORS_MAX)
        snprintf(r->errors[r->nerrors++], sizeof(r->errors[0]), "%.200s: %.100s", path, msg);
    if (r->format == BSL_FORMAT_TEXT)
        fprintf(r->out, "%s: error: %s\n", path, msg);
}

int bsl_report_end(struct bsl_report *r)
{
    FILE *out = r->out;
    if (r->format == BSL_FORMAT_TEXT) {
        fprintf(out,
                "%zu files, %zu diagnostics: %zu Error, %zu Warning, %zu Information, %zu Hint%s\n",
                r->files, r->total, r->by_lsp[0], r->by_lsp[1], r->by_lsp[2], r->by_lsp[3],
                r->truncated ? " (list truncated)" : "");
    } else {
        fprintf(out,
                "],\n\"summary\":{\"files\":%zu,\"files_with_diagnostics\":%zu,\"failed\":%zu,"
                "\"diagnostics\":%zu,\"written\":%zu,\"truncated\":%s,\"by_severity\":{",
                r->files, r->files_with, r->failed, r->total, r->written,
                r->truncated ? "true" : "false");
        for (int i = 0; i < 4; i++)
            fprintf(out, "%s\"%s\":%zu", i ? "," : "", lsp_names[i], r->by_lsp[i]);
        fputs("},\"by_code\":{", out);
        bool first = true;
        for (int i = 0; i < D_COUNT_; i++)
            if (r->by_code[i]) {
                fprintf(out, "%s\"%s\":%zu", first ? "" : ",", bsl_diag_info(i)->code,
                        r->by_code[i]);
                first = false;
            }
        fputs("},\"errors\":[", out);
        for (size_t i = 0; i < r->nerrors; i++) {
            if (i)
                fputc(',', out);
            jstr(out, r->errors[i]);
        }
        fputs("]}}\n", out);
    }
    if (fflush(out) != 0 || ferror(out))
        return -EIO;
    return 0;
}
