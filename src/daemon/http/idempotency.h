/* Idempotency-Key on the routes that create things or run code (sandbox creation,
 * exec, run): the same key with the same request replays the saved answer for 24 h.
 * Keys are scoped to the caller's user. */
#ifndef SBX_IDEMPOTENCY_H
#define SBX_IDEMPOTENCY_H

#include <jansson.h>

struct http_req;
struct store;
struct idem_claim;

/* Returns 1 when the request was answered here (a replay, a mismatch, a request still
 * in progress, a malformed key), 0 to go ahead. With a key, the claim is attached to
 * the request: the request's answer is saved (or the claim released) automatically,
 * unless an operation that outlives the request takes it with idem_take. */
typedef void (*idem_replay_fn)(struct http_req *req, unsigned status, const char *body);
/* replay (may be NULL) renders a saved answer, e.g. as server-sent events; by default it
 * is sent back as it was saved. */
int idem_begin(struct store *st, struct http_req *req, idem_replay_fn replay);
/* Detach the request's claim (NULL when it has none); finish it with idem_finish. */
struct idem_claim *idem_take(struct http_req *req);
/* Save (or release) and free the claim. NULL is fine. */
void idem_finish(struct idem_claim *c, unsigned status, const char *body);

#endif
