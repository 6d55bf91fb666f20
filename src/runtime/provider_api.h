/* A client of E2B-protocol providers (E2B, self-hosted E2B, CubeSandbox): their control
 * plane (/sandboxes) and the envd data plane of a provider sandbox (Connect RPC with the
 * JSON codec, and envd's /files), over libcurl. Shared by sbx-shim (the provider relay,
 * shim_provider.c) and sbxd (the start-up probe, the configurations' probe and inventory).
 * Library code: never logs, never exits (docs/providers.md). */
#ifndef SBX_RUNTIME_PROVIDER_API_H
#define SBX_RUNTIME_PROVIDER_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* envd's port: the data plane's E2b-Sandbox-Port, and the host name's prefix. */
#define PROVIDER_ENVD_PORT 49983
/* The most of a control-plane or unary answer kept. */
#define PROVIDER_RESP_MAX (4u * 1024u * 1024u)
/* The largest Connect envelope accepted from a process stream. */
#define PROVIDER_ENVELOPE_MAX (16u * 1024u * 1024u)
/* A provider's HTTP timeout when the connection names none. */
#define PROVIDER_HTTP_TIMEOUT_MS_DEFAULT 30000L
/* The metadata key naming the sbx sandbox a provider sandbox is (the inventory's filter). */
#define PROVIDER_META_ID "sbx_id"
/* The metadata key naming the sbx configuration it was made from, when there is one. */
#define PROVIDER_META_CONFIG "sbx_config"

/* How to reach one provider. Strings are borrowed. */
struct provider_conn {
    const char *kind;        /* "e2b" or "cube" */
    const char *api_url;     /* control plane, e.g. https://api.e2b.app */
    const char *api_key;     /* X-API-KEY; NULL or "" when the provider wants none */
    const char *sandbox_url; /* data plane through one proxy (E2b-Sandbox-Id headers), or NULL:
                                https://49983-<id>.<domain> */
    const char *domain;      /* sandbox_domain; NULL: the domain the create answered */
    long http_timeout_ms;    /* every request's bound; 0: PROVIDER_HTTP_TIMEOUT_MS_DEFAULT */
};

/* A provider sandbox as the data plane needs it. */
struct provider_sandbox {
    char id[128];
    char token[256];  /* envdAccessToken, may be empty */
    char domain[256]; /* the create's domain, may be empty */
};

/* The connection from a JSON object {kind, api_url, api_key, sandbox_url, domain,
 * http_timeout_ms}; strings borrowed from obj. */
int provider_conn_from_json(json_t *obj, struct provider_conn *out, struct sbx_err *err);

/* One control-plane request: method on path (below api_url) with a JSON body or none.
 * Transport failures are errors with codes provider_unreachable / provider_timeout; a
 * status is judged by the caller (provider_status_error). *resp may be NULL. */
int provider_call(const struct provider_conn *c, const char *method, const char *path,
                  json_t *body, long *status, char **resp, struct sbx_err *err);

/* An unexpected status as an sbx error carrying the provider's message: 401/403
 * provider_auth_failed, 429 provider_rate_limited, 408/504 provider_timeout, any other
 * provider_error; what says which call it was. Returns the negative errno. */
int provider_status_error(long status, const char *resp, const char *what, struct sbx_err *err);

/* POST /sandboxes: template, timeout (s), env vars, metadata, network (may be NULL). */
int provider_sandbox_create(const struct provider_conn *c, const char *template_id,
                            long timeout_s, json_t *env, json_t *metadata, json_t *network,
                            struct provider_sandbox *out, struct sbx_err *err);
/* DELETE /sandboxes/{id}; a sandbox already gone (404) is no error. */
int provider_sandbox_delete(const struct provider_conn *c, const char *id, struct sbx_err *err);
/* GET /v2/sandboxes?state=running,paused, every page: the provider's running and paused
 * sandboxes, a JSON array (new reference). At most PROVIDER_LIST_PAGES_MAX pages of
 * PROVIDER_LIST_PAGE (E2B's v2 list answers at most 100 a page). */
#define PROVIDER_LIST_PAGE 100
#define PROVIDER_LIST_PAGES_MAX 100
#define PROVIDER_TOKEN_MAX 256 /* a page's X-Next-Token */
int provider_sandbox_list(const struct provider_conn *c, json_t **out, struct sbx_err *err);
/* POST /sandboxes/{id}/pause: the provider keeps the sandbox (memory and files) stopped;
 * one already paused (409) is no error. */
int provider_sandbox_pause(const struct provider_conn *c, const char *id, struct sbx_err *err);
/* POST /sandboxes/{id}/connect {timeout}: resumes a paused sandbox (or extends a running
 * one); out gets its data-plane access as the answer names it. A sandbox the provider no
 * longer has is -ENOENT, code provider_sandbox_gone. */
int provider_sandbox_connect(const struct provider_conn *c, const char *id, long timeout_s,
                             struct provider_sandbox *out, struct sbx_err *err);
/* GET /templates: the provider's templates, a JSON array (new reference). */
int provider_template_list(const struct provider_conn *c, json_t **out, struct sbx_err *err);

/* envd's POST /files?path=: the bytes of fd (to its end) as the file at path. */
int provider_upload(const struct provider_conn *c, const struct provider_sandbox *sb,
                    const char *path, int fd, struct sbx_err *err);

/* A unary Connect call of envd (e.g. "process.Process/SendInput") with msg as its request.
 * A Connect error answer fills err with its code and message and returns -EIO. */
int provider_rpc(const struct provider_conn *c, const struct provider_sandbox *sb,
                 const char *method, json_t *msg, json_t **out, struct sbx_err *err);

/* A server-streaming Connect call: each message of the answer to on_msg (borrowed); a
 * non-zero return from on_msg stops the stream with that value. The end-stream's error,
 * when there is one, fills err. Blocks until the stream ends (no overall timeout). */
typedef int (*provider_msg_fn)(json_t *msg, void *data);
int provider_stream(const struct provider_conn *c, const struct provider_sandbox *sb,
                    const char *method, json_t *msg, provider_msg_fn on_msg, void *data,
                    struct sbx_err *err);

#endif
