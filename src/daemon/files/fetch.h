/* Fetching a url input for a sandbox. The URL is held to the sandbox's egress policy
 * (egress_proxy_check_url), its host is resolved and its address validated by the
 * egress resolver like any connection from inside, and libcurl then fetches it on a
 * worker thread pinned to that address: HTTPS only, no redirects (a redirect could lead
 * anywhere), no proxy, at most FETCH_MAX_BYTES, within FETCH_TIMEOUT_S. */
#ifndef SBX_FETCH_H
#define SBX_FETCH_H

#include <stddef.h>

#include "../../common/err.h"

#define FETCH_MAX_BYTES (64u * 1024u * 1024u)
#define FETCH_TIMEOUT_S 60

struct egress_proxy;
struct egress_policy;
struct jobs;
struct fetch;

/* Called once on the loop, unless fetch_cancel ran first. data (malloc'd, owned by the
 * callee) on success; err (invalid_input, egress_denied, input_too_large,
 * input_fetch_failed) otherwise. */
typedef void (*fetch_done_fn)(unsigned char *data, size_t len, const struct sbx_err *err,
                              void *arg);

/* NULL with err filled when the URL is refused at once. ca_file (may be NULL) adds a CA
 * bundle the operator trusts for url inputs. */
struct fetch *fetch_start(struct egress_proxy *px, struct jobs *jobs,
                          const struct egress_policy *policy, const char *url,
                          const char *ca_file, fetch_done_fn cb, void *arg, struct sbx_err *err);
void fetch_cancel(struct fetch *f);

#endif
