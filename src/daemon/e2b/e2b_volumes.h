/* E2B's volumes on sbx's volumes (e2b_volumes.c, docs/e2b.md). */
#ifndef SBX_E2B_VOLUMES_H
#define SBX_E2B_VOLUMES_H

#include <jansson.h>

#include "../../common/err.h"

/* Sandbox.create's volumeMounts [{name, path}] as a create's "volumes" [{volume, path}]
 * (checked further by the create); *out NULL when none. invalid_volume (400). */
int e2b_volume_mounts(json_t *in, json_t **out, struct sbx_err *err);

#endif
