/* Preview URLs (docs/preview.md): signed links to a port inside a sandbox, served on
 * sbxd's own preview listener. A connection's first request head is parsed (by
 * http_parser) only to route it — by host name {port}-{id}.<domain> or by path
 * /p/{id}/{port}/… — and to check the link's signature and expiry; from then on its
 * bytes are relayed as they are, both ways, through the agent's "tcp_connect" stream to
 * 127.0.0.1:port inside that sandbox, so streaming, chunked, SSE and WebSocket upgrades
 * pass through untouched. A relayed connection is cut when its link expires. */
#ifndef SBX_PREVIEW_H
#define SBX_PREVIEW_H

#include <stddef.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../config.h"
#include "../sandbox/manager.h"

#define PREVIEW_PORT_MIN 1024
#define PREVIEW_PORT_MAX 65535
#define PREVIEW_TTL_MIN 60
#define PREVIEW_TTL_MAX 3600
#define PREVIEW_TTL_DEFAULT 900
/* Bounds on what a client controls. */
#define PREVIEW_HEAD_MAX (16u * 1024u) /* request line + headers */
#define PREVIEW_HEADERS_MAX 100
#define PREVIEW_HEAD_TIMEOUT_MS 30000
#define PREVIEW_CONNS_MAX 1024
#define PREVIEW_CONNS_PER_SANDBOX 64
/* "<expires>.<signature>" in ?sbx_preview= or the sbx_preview cookie. */
#define PREVIEW_TOKEN_PARAM "sbx_preview"
#define PREVIEW_URL_MAX 1024
/* Sandbox meta (store_meta_*) set by the E2B surface: "1" when the sandbox's ports are
 * public by host name on the E2B domain (E2B's allowPublicTraffic), else the token a
 * request by that name must carry in PREVIEW_TRAFFIC_HEADER. */
#define PREVIEW_META_PUBLIC "preview_public_by_name"
#define PREVIEW_META_TRAFFIC_TOKEN "preview_traffic_token"
#define PREVIEW_TRAFFIC_HEADER "e2b-traffic-access-token"
#define PREVIEW_TRAFFIC_TOKEN_MAX 64
/* How long a connection by name alone is kept (it has no link expiry of its own). */
#define PREVIEW_PUBLIC_HOLD_S 86400

struct previews;

/* Load the link key (<data>/preview-link.key) and listen on cfg->preview_listen. */
int previews_new(const struct sbxd_config *cfg, struct loop *l, struct manager *mgr,
                 struct previews **out, struct sbx_err *err);
/* Cut every connection. Call after manager_free, when no stream is left. */
void previews_free(struct previews *pv);

/* A signed link to port of sb for ttl_seconds, both validated here (invalid_port,
 * invalid_ttl). */
int preview_link(struct previews *pv, const struct sandbox *sb, long long port,
                 long long ttl_seconds, char url[PREVIEW_URL_MAX], long long *expires_at,
                 struct sbx_err *err);

/* POST /preview's body {port, ttl_seconds?, wait_seconds?} on a v2 sandbox: the link,
 * audited (without the link, which is a credential). *out: {object, sandbox_id, port, url,
 * expires_at}. wait_seconds NULL: the field is not accepted; else how long the caller is to
 * wait for the port (live/portwait.h). */
#define PREVIEW_WAIT_MAX 60
struct store;
struct auth_identity;
int preview_grant(struct previews *pv, struct store *st, const struct auth_identity *who,
                  const char *request_id, const struct sandbox *sb, json_t *body,
                  long long *wait_seconds, json_t **out, struct sbx_err *err);

#endif
