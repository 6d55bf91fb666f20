/* File listings and stats as JSON, and the listing route's query and answer, shared by the
 * workspace's routes (files_api.c) and the volumes' (volumes/volfiles_api.c). */
#ifndef SBX_FILES_LISTING_H
#define SBX_FILES_LISTING_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "workspace.h"

/* Most entries one listing answers. */
#define FILES_LIST_MAX 10000

/* obj's "path": a workspace path as it is when it is UTF-8; else shown with U+FFFD for
 * each byte that is not, and its bytes in "path_base64" (a name JSON cannot carry as it
 * is; the same on a host workspace and through the agent, docs/files.md). */
void files_path_set(json_t *obj, const char *path);
/* A ws_walk callback appending {path, type, size, mode, mtime} to the array data. */
int files_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err);
/* A query flag: absent, "", "0" or "false" are false; "1" or "true" true; else -EINVAL. */
int files_parse_bool(const char *v, bool *out);

struct http_req;

/* {object: "file", path, type, size, mode, mtime, target (a symlink's)}. */
json_t *files_stat_json(const char *path, const struct stat *st, const char *target);
/* GET ...files?path=&recursive=: path ("" when absent, checked by the caller) and the flag;
 * -1 once a bad flag was answered 400 invalid_request. */
int files_list_query(struct http_req *req, const char **path, bool *recursive);
/* Answer the listing of path beneath root: {object: "list", path, recursive, data,
 * truncated}, at most FILES_LIST_MAX entries, or the walk's error. */
void files_list_answer(struct http_req *req, int root, const char *path, bool recursive);

#endif
