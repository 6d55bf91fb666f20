/* The parser of the file helper's "export" stream (agentfs.h): for each file a JSON header
 * line ({path, mode, mtime_ns}), then chunks ("%08x" length, bytes), a zero length ending
 * the file. Used by the artifacts' staging (collect.c) and by receipts, which hash the
 * bytes of a remote workspace's outputs in sbxd (exec/receipt_agent.c). */
#ifndef SBX_FILES_EXPORTRD_H
#define SBX_FILES_EXPORTRD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "workspace.h"

/* A header line, at most: a path JSON-escaped (at most 6 bytes a byte), or in base64. */
#define EXPORT_HEAD_MAX (6 * WS_PATH_MAX + 256)

/* A workspace name as the file helper sends and takes it (agentfs_src.h): a JSON string
 * when it is UTF-8, else {"b64": its bytes} (JSON cannot carry other bytes). */
json_t *export_name_json(const char *path);
/* ... and back: the name's bytes (malloc'd), or NULL when v is neither form or holds a
 * NUL or more than WS_PATH_MAX bytes. */
char *export_name_of(const json_t *v);

struct export_reader_ops {
    /* A file begins; head is its header (borrowed), its path (bytes: export_name_of)
     * checked by ws_name_check. */
    int (*on_file)(json_t *head, const char *path, void *data, struct sbx_err *err);
    int (*on_bytes)(const uint8_t *buf, size_t len, void *data, struct sbx_err *err);
    /* The file's zero length came. */
    int (*on_end)(void *data, struct sbx_err *err);
};

struct export_reader {
    const struct export_reader_ops *ops;
    void *data;
    int state;
    char head[EXPORT_HEAD_MAX];
    size_t head_len;
    uint64_t left; /* bytes of the current chunk still to come */
};

void export_reader_init(struct export_reader *r, const struct export_reader_ops *ops, void *data);
/* A negative errno (err filled: the stream is malformed, or a callback's failure). */
int export_reader_feed(struct export_reader *r, const uint8_t *buf, size_t len,
                       struct sbx_err *err);
/* Whether the stream may end here (between files). */
bool export_reader_complete(const struct export_reader *r);

#endif
