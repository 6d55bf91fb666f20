/* What libsbx's files share about a client; not part of the public API. */
#ifndef SBX_LIB_CLIENT_PRIV_H
#define SBX_LIB_CLIENT_PRIV_H

#include <curl/curl.h>

#include "sbx.h"

struct sbx_client {
    char *url; /* without a trailing slash */
    char *key;
    CURL *curl;
    long status;
    char request_id[SBX_REQUEST_ID_MAX];
};

#endif
