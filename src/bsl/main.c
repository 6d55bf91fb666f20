/* sbx-bsl: static analysis of 1C:Enterprise (BSL) and OneScript modules (docs/bsl.md).
 *
 *   sbx-bsl [--format json|text] [--max-results N] [--diagnostics Code,Code] PATH...
 *   sbx-bsl --list | --version
 *
 * Each PATH is a module or a folder walked for .bsl and .os files. The report goes to
 * stdout (JSON in bsl-language-server's reporter shape by default); the exit status is 0
 * when it was written, 1 when no path could be read, 2 on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "report.h"
#include "walk.h"

#define SBX_BSL_VERSION "1.0"

static int usage(void)
{
    fputs("usage: sbx-bsl [--format json|text] [--max-results N] [--max-bytes N] "
          "[--diagnostics Code,Code] PATH...\n       sbx-bsl --list | --version\n",
          stderr);
    return 2;
}

/* "A,B,C" to the enabled set; an unknown code is an error. */
static int parse_codes(const char *list, bool *enabled)
{
    memset(enabled, 0, D_COUNT_ * sizeof(bool));
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && *p == ' ') {
            p++;
            n--;
        }
        while (n && p[n - 1] == ' ')
            n--;
        if (n) {
            int id = bsl_diag_by_code(p, n);
            if (id < 0) {
                fprintf(stderr, "sbx-bsl: unknown diagnostic '%.*s' (see --list)\n", (int)n, p);
                return -EINVAL;
            }
            enabled[id] = true;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static void list(void)
{
    for (int i = 0; i < D_COUNT_; i++) {
        const struct bsl_diag_info *d = bsl_diag_info(i);
        printf("%-28s %-8s %-11s %s\n", d->code, bsl_severity_name(d->severity),
               bsl_lsp_severity(i), d->summary);
    }
}

static size_t count_lines(const char *s, size_t n)
{
    size_t l = n ? 1 : 0;
    for (const char *p = s; (p = memchr(p, '\n', n - (size_t)(p - s))); p++)
        l++;
    return l;
}

int main(int argc, char **argv)
{
    enum bsl_format format = BSL_FORMAT_JSON;
    size_t max_results = BSL_RESULTS_DEFAULT, max_bytes = 0;
    bool enabled[D_COUNT_];
    for (int i = 0; i < D_COUNT_; i++)
        enabled[i] = true;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (!strcmp(a, "--version")) {
            printf("sbx-bsl %s\n", SBX_BSL_VERSION);
            return 0;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--list")) {
            list();
            return 0;
        }
        if (i + 1 >= argc)
            return usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--format")) {
            if (!strcmp(v, "json"))
                format = BSL_FORMAT_JSON;
            else if (!strcmp(v, "text"))
                format = BSL_FORMAT_TEXT;
            else
                return usage();
        } else if (!strcmp(a, "--max-results")) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (errno || *end || !*v || n < 1 || n > BSL_RESULTS_MAX) {
                fprintf(stderr, "sbx-bsl: --max-results must be 1..%d\n", BSL_RESULTS_MAX);
                return 2;
            }
            max_results = (size_t)n;
        } else if (!strcmp(a, "--max-bytes")) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (errno || *end || !*v || n < BSL_REPORT_MIN_BYTES || n > BSL_FILE_MAX) {
                fprintf(stderr, "sbx-bsl: --max-bytes must be %d..%u\n", BSL_REPORT_MIN_BYTES,
                        BSL_FILE_MAX);
                return 2;
            }
            max_bytes = (size_t)n;
        } else if (!strcmp(a, "--diagnostics")) {
            if (parse_codes(v, enabled) < 0)
                return 2;
        } else {
            return usage();
        }
    }
    if (i >= argc)
        return usage();

    struct bsl_report rep;
    bsl_report_begin(&rep, stdout, format, max_results, argc - i == 1 ? argv[i] : "");
    bsl_report_max_bytes(&rep, max_bytes);
    size_t ok_paths = 0;
    for (; i < argc; i++) {
        struct bsl_paths paths = {0};
        struct bsl_err err = {0};
        if (bsl_walk(argv[i], &paths, &err) < 0) {
            bsl_report_error(&rep, argv[i], err.msg);
            bsl_paths_free(&paths);
            continue;
        }
        ok_paths++;
        if (paths.truncated)
            bsl_report_error(&rep, argv[i], "more modules or deeper folders than the walk takes");
        for (size_t k = 0; k < paths.n; k++) {
            char *buf = NULL;
            size_t len = 0;
            struct bsl_diags d = {0};
            bool on[D_COUNT_];
            bsl_scope(paths.v[k], enabled, on);
            d.attributes = bsl_module_kind(paths.v[k]);
            if (bsl_read_file(paths.v[k], &buf, &len, &err) < 0 ||
                bsl_analyze(buf, len, on, &d, &err) < 0)
                bsl_report_error(&rep, paths.v[k], err.msg);
            else
                bsl_report_file(&rep, paths.v[k], &d, count_lines(buf, len));
            bsl_diags_free(&d);
            free(buf);
        }
        bsl_paths_free(&paths);
    }
    if (bsl_report_end(&rep) < 0) {
        fprintf(stderr, "sbx-bsl: writing the report failed\n");
        return 1;
    }
    return ok_paths ? 0 : 1;
}
