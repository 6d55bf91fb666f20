/* sbx-bsl: a static analyzer for 1C:Enterprise (BSL) and OneScript modules (docs/bsl.md).
 * Shared types: the error struct every function fills, and the named maximums on everything
 * the input controls. No global mutable state: a module is analysed in one struct bsl_module. */
#ifndef SBX_BSL_H
#define SBX_BSL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One module's source at most; bigger files are reported, not read. */
#define BSL_FILE_MAX (32u * 1024u * 1024u)
/* Nesting of blocks and expressions the parser follows; deeper is a ParseError. */
#define BSL_DEPTH_MAX 256
/* The height of the tree (a long a + b + ... chain nests without recursing in the parser);
 * the checks walk it recursively, so deeper is a ParseError too. */
#define BSL_TREE_HEIGHT_MAX 4000
/* Diagnostics kept per module (past it the module's list is marked truncated). */
#define BSL_MODULE_DIAGS_MAX 10000
/* Folder walk: files and depth. */
#define BSL_WALK_FILES_MAX 200000
#define BSL_WALK_DEPTH_MAX 64
/* A diagnostic's message. */
#define BSL_MSG_MAX 256
/* Names compared for keywords are at most this many bytes. */
#define BSL_KW_BYTES_MAX 48

struct bsl_err {
    int code; /* a negative errno */
    char msg[256];
};

int bsl_err_set(struct bsl_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A position: 1-based line, 1-based column counted in Unicode code points. */
struct bsl_pos {
    uint32_t line, col;
};

struct bsl_range {
    struct bsl_pos start, end; /* end is exclusive */
};

#endif
