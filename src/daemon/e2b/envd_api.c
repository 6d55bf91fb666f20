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
 * code interpreter's /contexts (but a restart) needs the sandbox's X-Access-Token. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static const struct route routes[] = {
    {"GET", "/e2b/sandbox/health", AUTH_PUBLIC, api_health, 0},
    {"GET", "/e2b/sandbox/files", AUTH_PUBLIC, api_files_get, 0},
    {"POST", "/e2b/sandbox/files", AUTH_PUBLIC, api_files_post, ROUTE_STREAM_BODY},
    {"POST", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
    {"GET", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
    {"DELETE", "/e2b/sandbox/{*}", AUTH_PUBLIC, api_any, 0},
};

const struct route_table e2b_sandbox_routes = ROUTE_TABLE(routes);
