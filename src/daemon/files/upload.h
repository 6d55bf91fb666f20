/* A streamed, atomic upload of one file beneath a root directory fd: the body goes to an
 * anonymous file (workspace.h's writer) and is renamed into place, off the loop, once
 * whole; an interrupted upload leaves nothing. Shared by the workspace's files and the
 * volumes' (docs/files.md, docs/volumes.md). */
#ifndef SBX_FILES_UPLOAD_H
#define SBX_FILES_UPLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../http/server.h"

#define FILES_UPLOAD_MAX (100ull * 1000ull * 1000ull)

struct sbxd;

struct files_upload_target {
    const char *action;    /* its audit entry's action ("file.upload") */
    const char *target_id; /* ... and target (the sandbox's or volume's id) */
    /* What a full filesystem is called (workspace.h says workspace_too_large), and why. */
    const char *full_code, *full_message;
    /* The answer's body for the stored file, when the surface has its own shape (E2B's
     * volume entries); NULL: {object: file, path, size}. */
    json_t *(*answer)(const char *path, const struct stat *st);
};

/* The body's declared length (*has_len false for a chunked one); false, with 413
 * file_too_large answered, when it is over FILES_UPLOAD_MAX. */
bool files_upload_length(struct http_req *req, uint64_t *len, bool *has_len);

/* Check path, refuse at once what cannot fit, and stream the body to path beneath root,
 * answering the request (200 {object: file, path, size}) and auditing the outcome. Takes
 * root over. */
void files_upload_serve(struct sbxd *d, struct http_req *req, int root, const char *path,
                        const struct files_upload_target *t);

#endif
