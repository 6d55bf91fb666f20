/* The CLI's pure parts (no I/O but the table's output stream): human formatting and the
 * parsing of option values. Unit-tested in tests/unit/test_cli.c. */
#ifndef SBX_CLI_FMT_H
#define SBX_CLI_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* "just now", "42s ago", "5m ago", "3h ago", "2d ago", or "in 5m" for a time ahead. */
void fmt_reltime(long long now, long long t, char *buf, size_t n);
/* "512 B", "1.5 KiB", "12.0 MiB", "3.2 GiB". */
void fmt_bytes(long long b, char *buf, size_t n);

/* A table printed with each column as wide as its widest cell (counted in UTF-8
 * characters), two spaces between columns, the last column not padded. */
#define FMT_TABLE_COLS 12
struct fmt_table {
    size_t ncols, nrows, cap;
    char **cells; /* nrows * ncols, row 0 the header */
};
void fmt_table_init(struct fmt_table *t, size_t ncols, const char *const *header);
/* cells: ncols strings (NULL prints as "-"), copied. */
void fmt_table_add(struct fmt_table *t, const char *const *cells);
void fmt_table_print(const struct fmt_table *t, FILE *f);
void fmt_table_release(struct fmt_table *t);

/* "90", "90s", "15m", "2h", "1d" -> seconds. false for anything else or over a year. */
bool parse_duration(const char *s, long long *out);
/* A positive integer in [min, max]. */
bool parse_int(const char *s, long long min, long long max, long long *out);
/* "NAME=value": *name gets a copy of NAME (free it), *value points into s. */
bool parse_env_pair(const char *s, char **name, const char **value);
/* The run language from a file name's extension: python, bash, node; NULL when unknown. */
const char *lang_from_path(const char *path);
/* "ID:PATH" -> true with the id and the path split out (free both); a local path (no
 * colon before the first slash, or starting with / or .) -> false. */
bool parse_remote(const char *s, char **id, char **path);
/* Does this Python input need another line before it can run (the REPL's "..." prompt)? */
bool code_needs_more(const char *src);

#endif
