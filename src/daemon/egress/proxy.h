/* sbxd's egress proxy. Every connection a command makes to the agent's listener arrives
 * as an agent-opened "egress" stream; the proxy reads the client's request (CONNECT to
 * port 443, or a plain-HTTP request to port 80, parsed by http_parser), judges the host
 * against the sandbox's policy and the operator's, resolves it itself, dials only an
 * address it validated, checks the TLS SNI against the CONNECT host, relays bytes with
 * the channel's flow control both ways, and logs every connection in the store.
 * Refusals are answered (403 with a reason, x-sbx-egress-reason), never left hanging.
 * See docs/egress.md. */
#ifndef SBX_EGRESS_PROXY_H
#define SBX_EGRESS_PROXY_H

#include <jansson.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../sandbox/channel.h"
#include "../store/store.h"
#include "policy.h"

/* Bounds on what a client controls. */
#define EGRESS_HEAD_MAX (16u * 1024u) /* request line + headers */
#define EGRESS_HEADERS_MAX 100
#define EGRESS_CONNS_PER_SANDBOX 64
#define EGRESS_HEAD_TIMEOUT_MS 30000
#define EGRESS_RESOLVE_TIMEOUT_MS 15000
#define EGRESS_CONNECT_TIMEOUT_MS 10000
#define EGRESS_SNI_TIMEOUT_MS 10000
/* After a refusal, how long the client may take to read it and hang up. */
#define EGRESS_LINGER_MS 10000
/* An intercepted connection: what may wait for the upstream before the client's bytes
 * stop being credited, and the room kept in the agent's window when reading from the
 * upstream: a record split across two reads comes out whole after the second (up to
 * 16 KiB more than was read), and every record sealed again has its own framing. */
#define MITM_UP_QUEUE_MAX (1024u * 1024u)
#define MITM_TLS_SLACK (32u * 1024u)

struct egress_proxy;
struct sandbox;

struct egress_proxy_config {
    const char *policy_path;    /* SBX_NETWORK_POLICY, or NULL */
    const char *hosts_file;     /* SBX_EGRESS_HOSTS (tests), or NULL */
    const char *test_upstreams; /* SBX_EGRESS_TEST_UPSTREAMS (tests), or NULL */
    /* Header injection (docs/configs.md): the CA lives in data_dir (NULL: no injection);
     * upstreams are verified against the system's roots and upstream_ca_file. */
    const char *data_dir;
    const char *upstream_ca_file; /* SBX_FETCH_CA_FILE, or NULL */
};

int egress_proxy_new(struct loop *l, struct store *st, const struct egress_proxy_config *cfg,
                     struct egress_proxy **out, struct sbx_err *err);
/* Every connection is cut (and logged) first. */
void egress_proxy_free(struct egress_proxy *px);

/* The manager's acceptor for agent-opened streams (manager_set_stream_open): takes
 * op "egress" for the sandbox sb. */
int egress_stream_open(struct sandbox *sb, struct chan_stream *st, json_t *request,
                       const struct chan_stream_ops **ops, void **sdata, void *data,
                       struct sbx_err *err);

/* The per-daemon CA's certificate (PEM) that sandboxes with inject rules trust, or NULL. */
const char *egress_proxy_ca_pem(const struct egress_proxy *px);

/* The sandbox's policy was replaced: connections it no longer allows are cut. */
void egress_proxy_policy_changed(struct egress_proxy *px, const char *sandbox_id);

/* For what sbxd fetches itself for a sandbox (url inputs, whatever the sandbox's own policy):
 * is an https URL's host a public name the operator's policy allows (before resolution)?
 * Errors: invalid_input (not an https URL on port 443 with a host name), egress_denied (an IP
 * literal, an internal name, refused by the operator). The normalised host is written to
 * host. Its addresses are then checked with egress_proxy_resolve_checked. */
int egress_proxy_check_url(const struct egress_proxy *px, const char *url,
                           char host[EGRESS_HOST_MAX + 1], struct sbx_err *err);
/* Resolve host and pick the first address every rule allows for port; cb runs later on
 * the loop with status 0 and that address, or a negative errno and err (egress_denied),
 * unless egress_check_cancel ran first. */
struct egress_check;
typedef void (*egress_checked_fn)(void *data, int status, const struct egress_addr *addr,
                                  const struct sbx_err *err);
struct egress_check *egress_proxy_resolve_checked(struct egress_proxy *px, const char *host,
                                                  unsigned port, egress_checked_fn cb, void *data);
void egress_check_cancel(struct egress_check *c);

#endif
