/* The per-daemon CA the egress proxy signs certificates with for the hosts it injects
 * headers into (docs/configs.md), and the TLS contexts of both sides: towards a sandbox
 * (a leaf for the host, signed by this CA, which sandboxes of such configurations trust)
 * and towards the upstream (verified as a client would: the system's roots plus an
 * optional extra bundle, the host name checked). The CA's key stays in the data dir
 * (egress-ca.key, 0600). */
#ifndef SBX_EGRESS_MITM_CA_H
#define SBX_EGRESS_MITM_CA_H

#include <openssl/ssl.h>

#include "../../common/err.h"

#define MITM_CA_KEY_FILE "egress-ca.key"
#define MITM_CA_CERT_FILE "egress-ca.pem"
#define MITM_LEAF_CACHE 64

struct mitm_ca;

/* Load <data_dir>/egress-ca.{key,pem}, making them on first start. extra_ca: a PEM
 * bundle upstreams may also chain to (SBX_FETCH_CA_FILE), or NULL. */
int mitm_ca_open(const char *data_dir, const char *extra_ca, struct mitm_ca **out,
                 struct sbx_err *err);
void mitm_ca_free(struct mitm_ca *ca);
/* The CA certificate, PEM. */
const char *mitm_ca_pem(const struct mitm_ca *ca);
/* A server-side SSL for host (its leaf made or taken from the cache). */
SSL *mitm_ca_server(struct mitm_ca *ca, const char *host, struct sbx_err *err);
/* A client-side SSL for host: SNI set, the peer verified against the host name. */
SSL *mitm_ca_client(struct mitm_ca *ca, const char *host, struct sbx_err *err);

#endif
