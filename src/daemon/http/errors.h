/* API error code -> HTTP status: the one place where errors become statuses. */
#ifndef SBX_HTTP_ERRORS_H
#define SBX_HTTP_ERRORS_H

unsigned http_status_for_code(const char *code);

#endif
