/* Artifacts: every regular file under /workspace/out, copied into a content-addressed
 * store (<data>/artifacts/<sandbox>/<sha256>) while it is hashed, so that a signed link
 * serves exactly the bytes that were hashed, typed by libmagic from those bytes and
 * scanned by libclamav. Collection runs on a worker thread (jobs.h); it never follows a
 * symlink, so nothing outside the workspace is ever collected.
 *
 * Blobs outlive their sandbox for as long as a link to them can be valid (POST /run
 * destroys the sandbox and answers links): a blob whose newest link has expired is
 * removed by the next collection (at most once a minute) or at start-up. */
#ifndef SBX_ARTIFACTS_H
#define SBX_ARTIFACTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../config.h"
#include "../sandbox/params.h"
#include "scan.h"
#include "workspace.h"

#define ARTIFACTS_DIR SANDBOX_OUT_DIR
#define ARTIFACTS_MAX 1000
#define ARTIFACT_MIME_MAX 128
/* Staging directories in the store (collect.c: out/ of a workspace not on this host);
 * what a kill left of them is removed at start. */
#define ARTIFACTS_STAGE_PREFIX ".stage-"

struct artifacts;

struct artifact {
    char *path; /* relative to /workspace, e.g. "out/act.pdf" */
    uint64_t size;
    char sha256[WS_SHA256_HEX_LEN + 1];
    char mime[ARTIFACT_MIME_MAX];
    enum scan_verdict scan;
    char scan_detail[128]; /* the signature when infected, the reason on error */
};

struct artifact_list {
    struct artifact *v;
    size_t n;
    bool truncated;
    int ret; /* 0, or -errno with err */
    struct sbx_err err;
};

int artifacts_new(const struct sbxd_config *cfg, struct artifacts **out, struct sbx_err *err);
void artifacts_free(struct artifacts *a);

/* Worker thread. root: the workspace (O_PATH fd, borrowed). */
void artifacts_collect(struct artifacts *a, int root, const char *sandbox_id,
                       struct artifact_list *out);
void artifact_list_clear(struct artifact_list *l);

/* {path, size, mime, sha256, scan, scan_engine[, virus | scan_error][, url, expires_at]}
 * for each; links are signed here, valid for the configured TTL from now. */
json_t *artifacts_to_json(struct artifacts *a, const char *sandbox_id,
                          const struct artifact_list *l, long long now);

/* artifacts: the JSON array (owned by the callee) or NULL with err. */
typedef void (*artifacts_ready_fn)(json_t *artifacts, const struct sbx_err *err, void *data);

/* Collect a workspace's artifacts on a worker thread; cb runs on the loop. The sandbox
 * may be destroyed meanwhile: the job holds its own workspace fd. */
struct jobs;
void artifacts_collect_async(struct artifacts *a, struct jobs *jobs, const char *workspace,
                             const char *sandbox_id, artifacts_ready_fn cb, void *data);

/* A workspace path for a URL: each segment percent-escaped, the slashes kept. malloc'd. */
char *artifacts_escape_path(const char *path);

/* A signed link's blob: invalid_signature / link_expired (403), artifact_not_found. */
int artifacts_open_link(struct artifacts *a, const char *sandbox_id, const char *path,
                        const char *sha256, const char *expires, const char *sig, long long now,
                        int *fd, uint64_t *size, struct sbx_err *err);

#endif
