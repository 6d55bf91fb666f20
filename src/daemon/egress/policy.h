/* Egress policies: a sandbox's own (none, an allowlist of host names, a preset) and the
 * operator's network policy of spec 002 (deny_egress_by_default, allow_out, deny_out),
 * with the host-name rules both share. A connection must pass both: a sandbox's list
 * can narrow what the operator allows, never widen it. See docs/egress.md. */
#ifndef SBX_EGRESS_POLICY_H
#define SBX_EGRESS_POLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "addr.h"

#define EGRESS_DOMAINS_MAX 20
#define EGRESS_HOST_MAX 253
#define EGRESS_PRESET_MAX 8
/* Entries in each list of the operator's policy file. */
#define EGRESS_OPERATOR_RULES_MAX 1024
#define EGRESS_OPERATOR_FILE_MAX (1024 * 1024)

enum egress_mode {
    EGRESS_MODE_NONE,
    EGRESS_MODE_ALLOWLIST,
    EGRESS_MODE_PRESET,
};

struct egress_policy {
    enum egress_mode mode;
    char preset[EGRESS_PRESET_MAX]; /* for EGRESS_MODE_PRESET */
    unsigned n;                     /* normalised, distinct; a preset's hosts for a preset */
    char hosts[EGRESS_DOMAINS_MAX][EGRESS_HOST_MAX + 1];
};

/* The "egress" field of a request (absent or null: none). Error codes (all 400):
 * invalid_egress, egress_unknown_preset, egress_too_many_domains, egress_ip_not_allowed,
 * egress_internal_domain, egress_invalid_domain. */
int egress_policy_parse(json_t *v, struct egress_policy *out, struct sbx_err *err);
/* {mode:"none"} | {mode:"allowlist", domains:[...]} | {mode:"preset", preset}. */
json_t *egress_policy_to_json(const struct egress_policy *p);
/* host must be normalised. */
bool egress_policy_allows(const struct egress_policy *p, const char *host);

/* Lower case, one trailing dot dropped, labels of [a-z0-9-] (1..63, no hyphen at either
 * end), at most EGRESS_HOST_MAX. IP literals and internal names pass: judge them with
 * the two functions below. Error: egress_invalid_domain. */
int egress_host_normalise(const char *in, size_t len, char out[EGRESS_HOST_MAX + 1],
                          struct sbx_err *err);
/* An IP address in any spelling, or a name whose last label is numeric (which URL
 * parsers and resolvers read as IPv4). */
bool egress_host_is_ip(const char *host);
/* localhost, single-label names and the internal suffixes (.local, .internal,
 * .localdomain, .lan, .home, .corp, .intranet, .private, .arpa...). */
bool egress_host_is_internal(const char *host);

/* The operator's policy (SBX_NETWORK_POLICY). NULL means none: everything the sandbox
 * policy and the address rules allow. */
struct egress_operator;
int egress_operator_parse(json_t *j, struct egress_operator **out, struct sbx_err *err);
int egress_operator_load(const char *path, struct egress_operator **out, struct sbx_err *err);
void egress_operator_free(struct egress_operator *op);
/* Before resolution: does a domain rule (or default allow) admit host? */
bool egress_operator_host_allowed(const struct egress_operator *op, const char *host);
/* Can an allow_out address block admit a host no domain rule admits? */
bool egress_operator_may_allow_by_address(const struct egress_operator *op);
/* After resolution: NULL when addr may be dialled for a host whose domain verdict was
 * host_allowed, else the reason ("operator_deny_out", "operator_default_deny"). */
const char *egress_operator_addr_check(const struct egress_operator *op, bool host_allowed,
                                       const struct egress_addr *addr);

#endif
