/* The JSON of file listings, shared by the workspace's routes and the volumes'. */
#ifndef SBX_FILES_LISTING_H
#define SBX_FILES_LISTING_H

#include <jansson.h>
#include <stdbool.h>

#include "workspace.h"

/* Most entries one listing answers. */
#define FILES_LIST_MAX 10000

/* A ws_walk callback appending {path, type, size, mode, mtime} to the array data. */
int files_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err);
/* A query flag: absent, "", "0" or "false" are false; "1" or "true" true; else -EINVAL. */
int files_parse_bool(const char *v, bool *out);

#endif
