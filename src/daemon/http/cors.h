/* Cross-origin requests from browser apps (SBX_CORS_ORIGINS, none by default). The API's
 * credential is a Bearer key in a header, never a cookie, so no answer ever allows
 * credentials; "*" lets any origin in. */
#ifndef SBX_HTTP_CORS_H
#define SBX_HTTP_CORS_H

#include <stdbool.h>

#define CORS_MAX_AGE 600 /* seconds a browser may cache a preflight */

/* origins: NULL-terminated list ("https://app.example.com", or "*"), borrowed; NULL
 * allows none. */
bool cors_origin_allowed(char *const *origins, const char *origin);

/* What every answer to an allowed origin carries, as name/value pairs ended by NULL. */
extern const char *const cors_response_headers[];
/* ... and a preflight (OPTIONS with Access-Control-Request-Method) in addition. */
extern const char *const cors_preflight_headers[];

#endif
