/* Fetching a url input. sbxd fetches it itself, never the sandbox, so it works whatever the
 * sandbox's egress policy is (spec 000's run(..., inputs=[{path, url}]) in a sandbox with no
 * network); the sandbox gets the bytes. The URL's host must pass the operator's egress policy
 * (egress_proxy_check_url); it is resolved by the egress resolver and its address held to the
 * proxy's address rules (public addresses only), and libcurl then fetches it on a worker
 * thread pinned to that address: HTTPS on port 443 only, no redirects (a redirect could lead
 * anywhere), no proxy, at most max_bytes, within timeout_ms. */
#ifndef SBX_FETCH_H
#define SBX_FETCH_H

#include <stddef.h>

#include "../../common/err.h"

struct egress_proxy;
struct jobs;
struct fetch;

/* What one fetch was, for the caller's log and audit entry: host, the address dialled ("" when
 * it never got one), and how long it took. */
struct fetch_info {
    const char *host;
    const char *addr;
    long long ms;
};

/* Called once on the loop, unless fetch_cancel ran first. data (malloc'd, owned by the
 * callee) on success; err (egress_denied, input_too_large, input_fetch_failed) otherwise. */
typedef void (*fetch_done_fn)(unsigned char *data, size_t len, const struct fetch_info *info,
                              const struct sbx_err *err, void *arg);

/* NULL with err filled when the URL is refused at once (invalid_input, egress_denied).
 * ca_file (may be NULL) adds a CA bundle the operator trusts for url inputs. max_bytes and
 * timeout_ms (both > 0) bound this fetch. */
struct fetch *fetch_start(struct egress_proxy *px, struct jobs *jobs, const char *url,
                          const char *ca_file, size_t max_bytes, long long timeout_ms,
                          fetch_done_fn cb, void *arg, struct sbx_err *err);
void fetch_cancel(struct fetch *f);

#endif
