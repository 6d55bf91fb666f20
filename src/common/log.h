/* Logging for the daemon's main and manager only: library code returns errors instead. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void sbx_log_set_level(enum log_level lvl);
/* One JSON object a line (ts, level, msg, and request_id, user, sandbox when known)
 * instead of text (SBX_LOG_FORMAT=json). */
void sbx_log_set_json(bool on);
/* The request being handled, named on the lines logged meanwhile; NULLs clear it. */
void sbx_log_context(const char *request_id, const char *user);
void sbx_log(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) sbx_log(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) sbx_log(LOG_WARN, __VA_ARGS__)
#define log_info(...) sbx_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) sbx_log(LOG_DEBUG, __VA_ARGS__)

#endif
