/* Artifact collection for routes other than GET /artifacts (POST /v1/sandboxes/run). */
#ifndef SBX_API_ARTIFACTS_H
#define SBX_API_ARTIFACTS_H

#include <jansson.h>

#include "../../common/err.h"

struct sbxd;
struct sandbox;

/* artifacts: the JSON array (owned by the callee) or NULL with err. */
typedef void (*artifacts_ready_fn)(json_t *artifacts, const struct sbx_err *err, void *data);

/* Collect the sandbox's artifacts on a worker thread; cb runs on the loop. The sandbox
 * may be destroyed meanwhile: the job holds its own workspace fd. */
void api_artifacts_collect(struct sbxd *d, struct sandbox *sb, artifacts_ready_fn cb,
                           void *data);

#endif
