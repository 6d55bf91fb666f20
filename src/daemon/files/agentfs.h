/* File operations on any path of the sandbox, done inside it by the agent as the request's
 * user (agentfs_src.h's helper), so what they reach and the permission errors they get are
 * the sandbox user's own, whatever backend runs the sandbox. The E2B surface uses them for
 * paths outside the workspace; the files layer for every path of a workspace that is not
 * on this host (agentws.h). */
#ifndef SBX_FILES_AGENTFS_H
#define SBX_FILES_AGENTFS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct sandbox;
struct agentfs;

/* Largest answer the helper may send (a listing, or a file read outside the workspace). */
#define AGENTFS_OUT_MAX (64u * 1024u * 1024u)
/* Most entries a listing answers. */
#define AGENTFS_LIST_MAX 10000

/* Once: the helper's result ({"ok": …}'s value, borrowed; NULL for "read"), the raw bytes of
 * a "read", or err (file_not_found, path_permission_denied, dir_exists, invalid_path,
 * file_too_large, or the agent's). The call is freed after it. */
typedef void (*agentfs_done_fn)(json_t *ok, const uint8_t *raw, size_t len,
                                const struct sbx_err *err, void *data);

/* Run req ({op, path, …}, stolen) as user (NULL: the sandbox's user). On failure nothing is
 * reported later. */
int agentfs_start(struct sandbox *sb, const char *user, json_t *req, agentfs_done_fn done,
                  void *data, struct agentfs **out, struct sbx_err *err);
/* The requester went away: report nothing. */
void agentfs_cancel(struct agentfs *f);

/* A streamed operation, for what is too large to hold (a download, an upload, a tree of
 * artifacts): the helper's stdout comes as it is written, with the agent's flow control
 * (the owner returns credit for what it has passed on), and its stdin (with input) is fed
 * within the agent's window. req's ops: "cat" {root, path} answers "<size>\n" and the
 * bytes; "put" {root, path, size} takes stdin to a temporary name beside path and renames
 * it over path once size bytes came (with "keep_mode", an existing file's mode stays; else
 * 0644); "export" {root, path, max, bytes} answers each regular
 * file under path as a JSON line {path, mode, mtime_ns} and chunks ("%08x" length, bytes),
 * a zero length ending the file (with "paths", only those files, in that order: receipts read
 * back the outputs that changed). Paths are resolved beneath root inside the sandbox. The
 * non-streamed "wsscan" {root, out, max} answers the tree's fingerprint and out/'s files
 * (receipt.h), with "files" also every regular file's [path, size, mtime_ns, ctime_ns, ino]
 * (sandbox_bash's changed files, tools/toolws.c); "wsstat" {root, path} is lstat beneath
 * root, "wsls" {root, path, depth} a listing beneath it. */
#define AGENTFS_STREAM_TIMEOUT_MS (30 * 60 * 1000)
struct agentfs_stream;
struct agentfs_stream_ops {
    /* stdout bytes; give credit back with agentfs_stream_credit once they are passed on. */
    void (*on_data)(const uint8_t *buf, size_t len, void *data);
    /* Optional: agentfs_stream_room grew. */
    void (*on_room)(void *data);
    /* Once: NULL when the helper succeeded, else its error (as agentfs_done_fn's). The
     * stream is freed after it. */
    void (*on_done)(const struct sbx_err *err, void *data);
};
int agentfs_stream_start(struct sandbox *sb, json_t *req, bool input,
                         const struct agentfs_stream_ops *ops, void *data,
                         struct agentfs_stream **out, struct sbx_err *err);
/* How many stdin bytes the agent takes now (0 until the stream is open). */
size_t agentfs_stream_room(const struct agentfs_stream *s);
/* At most agentfs_stream_room bytes. */
int agentfs_stream_write(struct agentfs_stream *s, const void *buf, size_t len,
                         struct sbx_err *err);
int agentfs_stream_end_input(struct agentfs_stream *s, struct sbx_err *err);
void agentfs_stream_credit(struct agentfs_stream *s, size_t n);
/* The requester went away: the helper gets SIGTERM (a "put" drops its temporary file) and
 * nothing is reported. */
void agentfs_stream_cancel(struct agentfs_stream *s);

#endif
