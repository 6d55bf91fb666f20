/* The E2B-compatible surface (docs/e2b.md): the official e2b SDKs run unchanged against
 * sbx with E2B_API_URL=http://HOST:PORT/e2b/api and E2B_SANDBOX_URL=http://HOST:PORT/e2b/sandbox.
 * An E2B sandboxID is the sbx sandbox id; everything below calls the same manager, agent
 * and workspace functions as our own routes, so limits and audit are the same.
 *
 * This file: what the control plane (e2b_api.c) and the data plane (envd_api.c and the
 * e2b_*.c services) share. */
#ifndef SBX_E2B_H
#define SBX_E2B_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"

/* What E2B's envd reports; the SDK switches features on versions up to 0.6.4. */
#define E2B_ENVD_VERSION "0.6.13"
/* The E2B home directory, which is the sandbox's workspace. */
#define E2B_HOME "/home/user"
#define E2B_WORKSPACE "/workspace"
/* Ports the SDK names in E2b-Sandbox-Port: envd and the code interpreter. */
#define E2B_ENVD_PORT 49983
#define E2B_JUPYTER_PORT 49999
/* The per-sandbox access token (X-Access-Token), random hex. */
#define E2B_TOKEN_HEX_LEN 48
/* Facts kept beside a sandbox (store meta). */
#define E2B_META_TOKEN "e2b_access_token"
#define E2B_META_METADATA "e2b_metadata"
#define E2B_META_TEMPLATE "e2b_template"
#define E2B_METADATA_MAX (16u * 1024u)
/* A process's E2B config, kept as its agent label (the agent's PROCESS_LABEL_MAX). */
#define E2B_LABEL_MAX (16u * 1024u)

struct sbxd;
struct sandbox;
struct http_req;

/* Answer err as E2B's control plane does: {"code": <HTTP status>, "message",
 * "error_code": <sbx code>}, the status from http/errors.c. */
void e2b_fail(struct http_req *req, const struct sbx_err *err);
/* The key from X-API-KEY (or Bearer), checked as the router checks ours (tool level
 * sandbox): 0, or -1 once the request was answered with the error. */
int e2b_authenticate(struct sbxd *d, struct http_req *req);
/* The opening of a control-plane handler that takes a JSON body: e2b_authenticate, then
 * the body parsed into *body. 1 once the request was answered (the key was refused: nothing
 * to audit); a negative errno with err filled when the body is not JSON, left for the
 * handler to audit and answer as its other input errors; 0 when both went well. */
int e2b_begin(struct sbxd *d, struct http_req *req, json_t **body, struct sbx_err *err);

/* The sandbox's access token, made and stored the first time it is asked for. */
int e2b_access_token(struct sbxd *d, const struct sandbox *sb, char out[E2B_TOKEN_HEX_LEN + 1],
                     struct sbx_err *err);
/* Does token match the sandbox's stored one (constant time; false when it has none)? */
bool e2b_token_ok(struct sbxd *d, const struct sandbox *sb, const char *token);

/* The identity of a sandbox's owner, for data-plane requests (authenticated by the
 * sandbox's token, not a key): audit entries and lookups name the key that made it. */
void e2b_owner_identity(const struct sandbox *sb, struct auth_identity *out);

/* An E2B path (absolute under /home/user or /workspace, or relative to the home) as a
 * workspace-relative path ("" for the home itself); invalid_path otherwise. */
int e2b_path_to_ws(const char *path, char *out, size_t cap, struct sbx_err *err);
/* The E2B path of a workspace-relative path. */
char *e2b_ws_to_path(const char *rel);

/* The domain create and connect answer: the preview domain when configured, else the
 * host of our public URL. Never taken from a request, so the SDK never sends a key or a
 * token anywhere but here (docs/e2b.md). */
const char *e2b_domain(struct sbxd *d, char *buf, size_t cap);

/* The user a Start asks for: E2B's SDKs send `Authorization: Basic base64("<user>:")`
 * when the caller gives one (docs/e2b.md). No header: NULL (the default, "user"); "user"
 * or "root" (sandbox/runas.h) checked against what the operator allows; any other name
 * is invalid_user. */
int e2b_user(struct http_req *req, const struct sandbox *sb, const char **user,
             struct sbx_err *err);

/* A unix time as RFC 3339 in UTC, E2B's timestamps ("2026-12-07T04:30:00Z"). */
json_t *e2b_rfc3339(long long unix_s);
/* sb as E2B's ListedSandbox / SandboxDetail (state, times, metadata, template). */
json_t *e2b_sandbox_info(struct sbxd *d, const struct sandbox *sb);

#endif
