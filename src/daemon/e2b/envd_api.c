/* E2B's data plane under /e2b/sandbox (docs/e2b.md): what envd (port 49983) and the code
 * interpreter (port 49999) answer inside an E2B sandbox, served by sbxd for the sandbox
 * the request names:
 *   POST /e2b/sandbox/process.Process/{method}         Connect: Start Connect List SendInput
 *                                                      SendSignal CloseStdin Update
 *   POST /e2b/sandbox/filesystem.Filesystem/{method}   Connect: Stat ListDir MakeDir Move Remove
 *                                                      WatchDir
 *   GET  /e2b/sandbox/files?path=   POST (multipart or octet-stream)
 *   GET  /e2b/sandbox/health
 *   POST /e2b/sandbox/execute  GET|POST /e2b/sandbox/contexts  ...   (port 49999)
 * The sandbox: the E2b-Sandbox-Id header (E2b-Sandbox-Port picks the service), else a
 * Host of {port}-{id}.{domain} (a reverse proxy in front). Unknown, ended or paused:
 * 502, which the SDK reads as "the sandbox is gone". Every call but /health and the
 * code interpreter's /contexts (but a restart) needs the sandbox's X-Access-Token.
 *   GET|POST /files?path=&signature=…   the SDK's uploadUrl()/downloadUrl(): it keeps only
 *                                       the data plane's origin, so these are at the root. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "e2b.h"
#include "envd.h"

struct find {
    const char *id;
    struct sandbox *sb;
};

static void find_one(struct sandbox *sb, void *data)
{
    struct find *f = data;
    if (!strcmp(sb->rec.id, f->id))
        f->sb = sb;
}

/* The sandbox id and port from the headers, else from Host "{port}-{id}.{domain}". */
static bool target_of(struct http_req *req, char *id, size_t cap, unsigned *port)
{
    const char *h = http_req_header(req, "E2b-Sandbox-Id");
    const char *p = http_req_header(req, "E2b-Sandbox-Port");
    if (h && *h) {
        snprintf(id, cap, "%s", h);
        *port = p ? (unsigned)strtoul(p, NULL, 10) : E2B_ENVD_PORT;
        return strlen(h) < cap;
    }
    const char *host = http_req_header(req, "Host");
    const char *dash = host ? strchr(host, '-') : NULL;
    const char *dot = dash ? strchr(dash, '.') : NULL;
    if (!dot || (size_t)(dot - dash - 1) >= cap || dot == dash + 1)
        return false;
    *port = (unsigned)strtoul(host, NULL, 10);
    snprintf(id, cap, "%.*s", (int)(dot - dash - 1), dash + 1);
    return true;
}

static void gone(struct http_req *req, const char *id)
{
    http_respond_json(req, 502,
                      json_pack("{s:s,s:s,s:i}", "sandboxId", id, "message",
                                "The sandbox was not found", "code", 502));
}

/* Fill c for the request's sandbox, or answer (502, 401) and return -1. */
static int resolve(struct sbxd *d, struct http_req *req, bool need_token, struct envd_ctx *c,
                   unsigned *port)
{
    char id[STORE_ID_MAX + 1];
    if (!target_of(req, id, sizeof(id), port)) {
        http_respond_json(req, 400,
                          json_pack("{s:i,s:s}", "code", 400, "message",
                                    "name the sandbox with the E2b-Sandbox-Id header"));
        return -1;
    }
    struct find f = {.id = id};
    manager_each(d->mgr, NULL, find_one, &f);
    if (!f.sb || f.sb->ended || f.sb->paused) {
        gone(req, id);
        return -1;
    }
    if (need_token && !e2b_token_ok(d, f.sb, http_req_header(req, "X-Access-Token"))) {
        http_respond_json(req, 401,
                          json_pack("{s:i,s:s}", "code", 401, "message",
                                    "unauthorized access, please provide a valid access token"));
        return -1;
    }
    *c = (struct envd_ctx){.d = d, .req = req, .sb = f.sb};
    e2b_owner_identity(f.sb, &c->who);
    return 0;
}

static void api_health(struct sbxd *d, struct http_req *req)
{
    struct envd_ctx c;
    unsigned port;
    if (resolve(d, req, false, &c, &port) == 0)
        http_respond_text(req, 204, "");
}

static void api_files_get(struct sbxd *d, struct http_req *req)
{
    struct envd_ctx c;
    unsigned port;
    if (resolve(d, req, true, &c, &port) == 0)
        envd_files_get(&c);
}

static void api_files_post(struct sbxd *d, struct http_req *req)
{
    struct envd_ctx c;
    unsigned port;
    if (resolve(d, req, true, &c, &port) == 0)
        envd_files_post(&c);
}

static void api_any(struct sbxd *d, struct http_req *req)
{
    const char *rest = http_req_param(req, 0);
    struct envd_ctx c;
    unsigned port;
    /* The SDK sends no token to /contexts, which hold nothing but a name; a restart, which
     * loses the kernel's state, still needs it (docs/e2b.md). */
    bool contexts = !strncmp(rest, "contexts", 8) && (!rest[8] || rest[8] == '/');
    size_t n = strlen(rest);
    bool restart = n > 8 && !strcmp(rest + n - 8, "/restart");
    if (resolve(d, req, !contexts || restart, &c, &port) < 0)
        return;
    bool post = !strcmp(http_req_method(req), "POST");
    if (port == E2B_JUPYTER_PORT || !strcmp(rest, "execute") || contexts) {
        envd_interp(&c, rest);
    } else if (post && !strncmp(rest, "process.Process/", 16)) {
        envd_process(&c, rest + 16);
    } else if (post && !strncmp(rest, "filesystem.Filesystem/", 22)) {
        envd_fs(&c, rest + 22);
    } else {
        http_respond_json(req, 404,
                          json_pack("{s:i,s:s}", "code", 404, "message", "no such envd route"));
    }
}

/* ---- signed file URLs ---- */

/* envd's v1 signature: "v1_" + base64(sha256("path:op:user:token[:expiration]")), no '='. */
static void signature_of(const char *path, const char *op, const char *user, const char *token,
                         const char *exp, char *out, size_t cap)
{
    _cleanup_free_ char *raw = sbx_xasprintf("%s:%s:%s:%s%s%s", path, op, user, token,
                                             exp ? ":" : "", exp ? exp : "");
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)raw, strlen(raw), md);
    _cleanup_free_ char *b64 = sbx_base64_encode(md, sizeof(md));
    size_t n = strcspn(b64, "=");
    snprintf(out, cap, "v1_%.*s", (int)n, b64);
}

struct signed_find {
    struct sbxd *d;
    const char *path, *op, *user, *exp, *sig;
    struct sandbox *sb;
};

/* Nothing in the URL names the sandbox (the SDK keeps only the data plane's origin, and
 * the signature hashes its token with the path), so no index can lead from the URL to it:
 * every running sandbox's token is tried. They come in one store query (not one per
 * sandbox, nor any for sandboxes that never issued an E2B token), so a request costs one
 * query and a SHA-256 of ~100 bytes per running E2B sandbox (about a microsecond each);
 * the manager is walked only for the one that matched, which must be this node's. */
static void signed_one(const char *id, const char *token, void *data)
{
    struct signed_find *f = data;
    char want[64];
    if (f->sb || strlen(token) != E2B_TOKEN_HEX_LEN)
        return;
    signature_of(f->path, f->op, f->user, token, f->exp, want, sizeof(want));
    if (strlen(want) != strlen(f->sig) || CRYPTO_memcmp(want, f->sig, strlen(want)) != 0)
        return;
    struct find m = {.id = id};
    manager_each(f->d->mgr, NULL, find_one, &m);
    if (m.sb && !m.sb->ended && !m.sb->paused)
        f->sb = m.sb;
}

static void signed_error(struct http_req *req, unsigned status, const char *msg)
{
    http_respond_json(req, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

/* The URL is the credential: the signature names the sandbox (the one whose access token
 * made it), the path, the direction and the user, and the expiration when one was asked. */
static void api_signed_files(struct sbxd *d, struct http_req *req)
{
    bool get = !strcmp(http_req_method(req), "GET");
    struct signed_find f = {.d = d,
                            .path = http_req_query(req, "path") ?: "",
                            .op = get ? "read" : "write",
                            .user = http_req_query(req, "username") ?: "",
                            .exp = http_req_query(req, "signature_expiration"),
                            .sig = http_req_query(req, "signature")};
    if (!f.sig || strlen(f.sig) > 64) {
        signed_error(req, 401, "a signature is required: use the SDK's uploadUrl() or downloadUrl()");
        return;
    }
    if (f.exp) {
        char *end;
        errno = 0;
        long long e = strtoll(f.exp, &end, 10);
        if (errno || *end || !*f.exp || e * 1000 < sbx_wall_ms()) {
            signed_error(req, 401, "the signature has expired");
            return;
        }
    }
    if (*f.user && strcmp(f.user, "user")) {
        signed_error(req, 403, "signed URLs act as the sandbox's user only");
        return;
    }
    struct sbx_err err = {0};
    if (store_meta_each_running(d->store, E2B_META_TOKEN, signed_one, &f, &err) < 0) {
        signed_error(req, 500, "the sandboxes could not be read");
        return;
    }
    if (!f.sb) {
        signed_error(req, 401, "invalid signature");
        return;
    }
    struct envd_ctx c = {.d = d, .req = req, .sb = f.sb};
    e2b_owner_identity(f.sb, &c.who);
    if (get)
        envd_files_get(&c);
    else
        envd_files_post(&c);
}

static const struct route routes[] = {
    {"GET", "/e2b/sandbox/health", AUTH_PUBLIC, api_health, 0},
    {"GET", "/e2b/sandbox/files", AUTH_PUBLIC, api_files_get, 0},
    {"POST", "/e2b/sandbox/files", AUTH_PUBLIC, api_files_post, ROUTE_STREAM_BODY},
    {"POST", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
    {"GET", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
    {"DELETE", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
    {"GET", "/files", AUTH_PUBLIC, api_signed_files, 0},
    {"POST", "/files", AUTH_PUBLIC, api_signed_files, ROUTE_STREAM_BODY},
};

const struct route_table e2b_sandbox_routes = ROUTE_TABLE(routes);
