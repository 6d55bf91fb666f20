/* GET /openapi.json: docs/openapi.yaml, converted to JSON and compiled in at build time
 * (build/gen/openapi_json.c), so the document served is always the one of this binary. */
#include "../http/server.h"
#include "../http/router.h"

extern const char sbx_openapi_json[];

static void api_openapi(struct sbxd *d, struct http_req *req)
{
    http_respond_text(req, 200, sbx_openapi_json);
}

static const struct route routes[] = {
    {"GET", "/openapi.json", AUTH_PUBLIC, api_openapi, 0},
};
const struct route_table openapi_routes = ROUTE_TABLE(routes);
