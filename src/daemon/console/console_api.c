/* The web console (docs/console.md): GET /console and its files, and GET /v1/me, which
 * tells a page what the key it holds may do. The pages call only the public API, with the
 * key the user typed in (kept in the tab's sessionStorage); these routes serve files and
 * need no key. */
#include <jansson.h>

#include "../auth/auth.h"
#include "../http/router.h"
#include "../http/server.h"
#include "assets.h"

/* Scripts only from this origin, none inline; no plugins, frames or form posts. Styles
 * allow inline because xterm.js sizes its rows through a <style> element it writes. Images
 * allow data: (a kernel's PNG output) and blob: (a file previewed before its download). */
static const char csp[] =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

static void serve(struct http_req *req, const char *path)
{
    const struct console_asset *a = console_asset_find(path);
    if (!a) {
        http_respond_errorf(req, "not_found", "the console has no file %.128s", path);
        return;
    }
    http_req_add_header(req, "Content-Security-Policy", csp);
    http_req_add_header(req, "X-Content-Type-Options", "nosniff");
    http_req_add_header(req, "Referrer-Policy", "no-referrer");
    http_req_add_header(req, "Cache-Control", "no-cache");
    http_respond_bytes(req, 200, a->data, a->len, a->content_type);
}

static void api_console_index(struct sbxd *d, struct http_req *req)
{
    serve(req, "index.html");
}

static void api_console_file(struct sbxd *d, struct http_req *req)
{
    serve(req, http_req_param(req, 0));
}

static void api_me(struct sbxd *d, struct http_req *req)
{
    const struct auth_identity *k = http_req_identity(req);
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "object", "me", "user", k->user,
                                "key_id", k->key_id, "role", auth_role_name(k->role), "tool_level",
                                auth_tool_level_name(k->tool_level), "scope",
                                auth_scope_name(k->scope)));
}

static const struct route routes[] = {
    {"GET", "/console", AUTH_PUBLIC, api_console_index, 0},
    {"GET", "/console/{*}", AUTH_PUBLIC, api_console_file, 0},
    {"GET", "/v1/me", AUTH_KEY, api_me, 0},
};
const struct route_table console_routes = ROUTE_TABLE(routes);
