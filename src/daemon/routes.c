#include "routes.h"

#include <jansson.h>

#include "../common/util.h"
#include "http/server.h"

static void api_health(struct sbxd *d, struct http_req *req)
{
    http_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

static const struct route routes[] = {
    {"GET", "/healthz", AUTH_PUBLIC, api_health, 0},
};
static const struct route_table health_routes = ROUTE_TABLE(routes);

const struct route_table *const sbxd_routes[] = {
    &health_routes, &key_routes,     &audit_routes,   &sandbox_routes,  &snapshot_routes,
    &exec_routes,   &session_routes, &process_routes, &file_routes,     &artifact_routes,
    &egress_routes, &kernel_routes,  &pty_routes,     &terminal_routes, &preview_routes,
    &template_routes,
};
const size_t sbxd_route_tables = SBX_ARRAY_SIZE(sbxd_routes);
