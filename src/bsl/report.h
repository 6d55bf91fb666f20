/* The report: bsl-language-server's JSON reporter shape (fileinfos[].diagnostics[] with
 * range, severity, code, source, message) streamed file by file, with a summary by
 * severity and by code, or one line per diagnostic as text. */
#ifndef SBX_BSL_REPORT_H
#define SBX_BSL_REPORT_H

#include <stdio.h>

#include "diag.h"

/* Diagnostics written at most, by default and at most (--max-results). */
#define BSL_RESULTS_DEFAULT 1000
#define BSL_RESULTS_MAX 100000
/* Files whose read or parse failed, listed in the summary at most. */
#define BSL_REPORT_ERRORS_MAX 100
/* Room kept under max_bytes for the summary and the closing brackets. */
#define BSL_REPORT_TAIL_BYTES (BSL_REPORT_ERRORS_MAX * 330 + 4096)
/* --max-bytes at least (the tail and a few diagnostics). */
#define BSL_REPORT_MIN_BYTES 65536

enum bsl_format { BSL_FORMAT_JSON, BSL_FORMAT_TEXT };

struct bsl_report {
    FILE *out;
    enum bsl_format format;
    size_t max_results;
    size_t max_bytes; /* 0: no bound; else the report stops before passing it */
    size_t bytes;     /* written so far (the diagnostics' part) */
    size_t written, total, files, files_with, failed;
    size_t by_lsp[4]; /* Error, Warning, Information, Hint */
    size_t by_code[D_COUNT_];
    bool truncated, any_file;
    char errors[BSL_REPORT_ERRORS_MAX][320];
    size_t nerrors;
};

void bsl_report_begin(struct bsl_report *r, FILE *out, enum bsl_format format, size_t max_results,
                      const char *source_dir);
/* Bound the report's size (set after begin). */
static inline void bsl_report_max_bytes(struct bsl_report *r, size_t n)
{
    r->max_bytes = n;
}
/* One module's diagnostics (lines: the module's line count, for its metrics). */
void bsl_report_file(struct bsl_report *r, const char *path, const struct bsl_diags *d,
                     size_t lines);
/* A module that could not be read or analysed. */
void bsl_report_error(struct bsl_report *r, const char *path, const char *msg);
/* The summary; 0, or -EIO when the output could not be written. */
int bsl_report_end(struct bsl_report *r);

/* JSON string escaping (for tests too): s as a quoted JSON string. */
void bsl_json_string(FILE *out, const char *s, size_t len);

#endif
