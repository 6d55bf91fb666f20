/* The probe's external-network check (POST /v1/system/sandbox-check, docs/configs.md):
 * a host the configuration's policy lets out — the first host name of its allow_out,
 * else, where egress is allowed by default, the daemon's SBX_PROBE_HOST — is reached
 * from sbxd through the egress proxy's rules (the configuration's policy and rules, the
 * operator's, the address rules, the proxy's resolver), and, in a deep probe, from the
 * throw-away sandbox through its egress listener. Where the policy lets no host out the
 * check is skipped (ok null, skipped_by_policy) with the reason; where only the unset
 * SBX_PROBE_HOST could name one, too (no_probe_host). */
#ifndef SBX_CONFIGS_PROBE_NET_H
#define SBX_CONFIGS_PROBE_NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"
#include "../../common/jobs.h"
#include "../egress/policy.h"

struct egress_proxy;
struct probe_net;

/* ok: 1, 0, or -1 for skipped (null); reason NULL when ok is 1. */
typedef void (*probe_net_fn)(void *data, int ok, const char *message, const char *reason);

/* Pick the host for doc's policy and start reaching it: cb runs once, on the loop, unless
 * probe_net_cancel ran first; *out is NULL when cb already ran (the policy lets no host
 * out). host gets the host picked ("" when none). */
void probe_net_start(struct egress_proxy *px, struct jobs *jobs, const char *ca_file,
                     const char *fallback_host /* SBX_PROBE_HOST or NULL */, const json_t *doc,
                     probe_net_fn cb, void *data, char host[EGRESS_HOST_MAX + 1],
                     struct probe_net **out);
void probe_net_cancel(struct probe_net *n);

/* The deep check: what the sandbox runs (argv, a new array) for host, and how its stdout
 * reads. */
json_t *probe_net_sandbox_argv(const char *host);
extern const char *const probe_net_sandbox_script;
#define PROBE_NET_REASON_MAX 64
void probe_net_sandbox_judge(const char *out, size_t len, const char *host, int *ok, char *message,
                             size_t message_len, char reason[PROBE_NET_REASON_MAX]);

#endif
