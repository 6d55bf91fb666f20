#include "http/server.h"
#include "sbxd.h"
#include "routes.h"

void api_health(struct sbxd *d, struct http_req *req)
{
    http_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
}
