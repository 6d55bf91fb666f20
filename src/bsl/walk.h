/* The modules under a path: a file as given, or a folder's .bsl and .os files (a
 * configuration dump), walked without following symbolic links, in a stable order. */
#ifndef SBX_BSL_WALK_H
#define SBX_BSL_WALK_H

#include "bsl.h"

struct bsl_paths {
    char **v;
    size_t n, cap;
    bool truncated; /* past BSL_WALK_FILES_MAX or BSL_WALK_DEPTH_MAX */
};

/* Add path (a file) or the modules beneath it (a folder), sorted. 0 or a negative errno
 * with err filled. */
int bsl_walk(const char *path, struct bsl_paths *out, struct bsl_err *err);
void bsl_paths_free(struct bsl_paths *p);
/* Whether a name ends in .bsl or .os (any case). */
bool bsl_module_name(const char *name);

/* Read a whole file of at most BSL_FILE_MAX bytes (malloc'ed, NUL-terminated). */
int bsl_read_file(const char *path, char **buf, size_t *len, struct bsl_err *err);

#endif
