/* Retention: exec records, egress logs and the audit log are pruned by age by a timer on
 * the loop, in small batches so that no request waits long behind it. Pruning the audit
 * log moves a signed anchor (the last pruned entry's seq and hash, HMAC-SHA256 with
 * <data>/audit-anchor.key) so that the chain still verifies from where it now starts. */
#ifndef SBX_RETENTION_H
#define SBX_RETENTION_H

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../config.h"
#include "../store/store.h"

/* Rows removed per table per turn of the loop. */
#define RETENTION_BATCH 500

struct retention;

int retention_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                  struct retention **out, struct sbx_err *err);
void retention_free(struct retention *r);
const struct store_anchor_key *retention_anchor_key(const struct retention *r);

#endif
