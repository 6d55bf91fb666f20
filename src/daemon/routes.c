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

/* One table a line, so that features add lines, not edit them. */
/* clang-format off */
const struct route_table *const sbxd_routes[] = {
    &health_routes,
    &key_routes,
    &audit_routes,
    &sandbox_routes,
    &snapshot_routes,
    &exec_routes,
    &session_routes,
    &process_routes,
    &file_routes,
    &artifact_routes,
    &egress_routes,
    &kernel_routes,
    &pty_routes,
    &terminal_routes,
    &preview_routes,
    &skill_routes,
    &skill_install_routes,
    &wallet_routes,
    &metrics_routes,
    &tool_routes,
    &mcp_routes,
    &openapi_routes,
    &config_routes,
    &unclaimed_routes,
    &me_routes,
    &probe_routes,
    &templates_query_routes,
    &e2b_api_routes,
    &e2b_secret_routes,
    &e2b_snapshot_routes,
    &e2b_volume_routes,
    &e2b_template_routes,
    &e2b_template_tag_routes,
    &e2b_sandbox_routes,
    &template_routes,
    &chat_routes,
    &template_build_routes,
    &template_docker_routes,
    &node_routes,
    &volume_routes,
    &volume_file_routes,
    &console_routes,
};
/* clang-format on */
const size_t sbxd_route_tables = SBX_ARRAY_SIZE(sbxd_routes);

void sbxd_routes_print(FILE *out)
{
    for (size_t t = 0; t < sbxd_route_tables; t++)
        for (size_t i = 0; i < sbxd_routes[t]->n; i++)
            fprintf(out, "%s %s\n", sbxd_routes[t]->routes[i].method,
                    sbxd_routes[t]->routes[i].pattern);
}
