#include "cors.h"

#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

bool cors_origin_allowed(char *const *origins, const char *origin)
{
    if (!origins || !origin || !*origin)
        return false;
    for (char *const *o = origins; *o; o++)
        if (!strcmp(*o, "*") || !strcmp(*o, origin))
            return true;
    return false;
}

const char *const cors_response_headers[] = {
    "Vary", "Origin",
    /* What a browser app may read of an answer besides the simple headers. */
    "Access-Control-Expose-Headers",
    "x-request-id, x-sbx-sha256, Content-Disposition, x-sbx-idempotent-replay, Location, "
    "x-sbx-cost-micro-usd, x-sbx-data-region",
    NULL};

const char *const cors_preflight_headers[] = {
    "Access-Control-Allow-Methods",
    "GET, POST, PUT, PATCH, DELETE, OPTIONS",
    "Access-Control-Allow-Headers",
    "Authorization, Content-Type, Idempotency-Key, Accept, Last-Event-ID",
    "Access-Control-Max-Age",
    STR(CORS_MAX_AGE),
    NULL};
