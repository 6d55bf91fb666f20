/* /mcp, the MCP server's Streamable HTTP endpoint (docs/mcp.md):
 *   POST   one JSON-RPC message (the key is checked on every request, by the router)
 *   GET    405: the server has nothing to push, so it offers no stream
 *   DELETE the end of a session
 * A request from a browser Origin not in SBX_MCP_ORIGINS, or naming a Host this daemon is
 * not known by, is refused with 403 (DNS rebinding). */
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "mcp.h"

/* The host part of a Host header or of a URL's authority ("[::1]:8787" -> "::1"). */
static void host_part(const char *in, char *out, size_t size)
{
    const char *b = in, *e;
    if (*b == '[') {
        b++;
        e = strchr(b, ']');
    } else {
        e = strchr(b, ':');
    }
    size_t n = e ? (size_t)(e - b) : strlen(b);
    if (n >= size)
        n = 0;
    memcpy(out, b, n);
    out[n] = 0;
}

static bool host_is(const char *host, const char *authority)
{
    char h[256];
    if (!authority)
        return false;
    host_part(authority, h, sizeof(h));
    return *h && !strcasecmp(h, host);
}

static bool host_allowed(const struct sbxd_config *cfg, const char *header)
{
    char host[256];
    if (!header)
        return false;
    host_part(header, host, sizeof(host));
    if (!strcmp(host, "127.0.0.1") || !strcasecmp(host, "localhost") || !strcmp(host, "::1"))
        return true;
    const char *pub = cfg->public_url ? strstr(cfg->public_url, "://") : NULL;
    if (host_is(host, cfg->listen) || (pub && host_is(host, pub + 3)))
        return true;
    for (char **h = cfg->mcp_hosts; h && *h; h++)
        if (!strcasecmp(*h, host))
            return true;
    return false;
}

static bool origin_allowed(const struct sbxd_config *cfg, const char *origin)
{
    if (!origin)
        return true; /* not a browser */
    for (char **o = cfg->mcp_origins; o && *o; o++)
        if (!strcmp(*o, origin))
            return true;
    return false;
}

static bool checked(struct sbxd *d, struct http_req *req)
{
    if (origin_allowed(&d->cfg, http_req_header(req, "Origin")) &&
        host_allowed(&d->cfg, http_req_header(req, "Host")))
        return true;
    http_respond_json(req, 403,
                      json_pack("{s:s,s:{s:i,s:s}}", "jsonrpc", "2.0", "error", "code", -32000,
                                "message", "Forbidden: this Origin or Host may not use /mcp"));
    return false;
}

static void api_mcp_post(struct sbxd *d, struct http_req *req)
{
    if (checked(d, req))
        mcp_post(d->mcp, req);
}

static void api_mcp_get(struct sbxd *d, struct http_req *req)
{
    if (!checked(d, req))
        return;
    http_req_add_header(req, "Allow", "POST, DELETE");
    http_respond_json(req, 405,
                      json_pack("{s:s,s:{s:i,s:s}}", "jsonrpc", "2.0", "error", "code", -32000,
                                "message", "Method not allowed: this server offers no GET stream"));
}

static void api_mcp_delete(struct sbxd *d, struct http_req *req)
{
    if (checked(d, req))
        mcp_delete(d->mcp, req);
}

static const struct route routes[] = {
    {"POST", "/mcp", AUTH_SANDBOX, api_mcp_post, 0},
    {"GET", "/mcp", AUTH_SANDBOX, api_mcp_get, 0},
    {"DELETE", "/mcp", AUTH_SANDBOX, api_mcp_delete, 0},
};

const struct route_table mcp_routes = ROUTE_TABLE(routes);
