#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

/* The one process-wide setting: chosen once by main before anything runs. */
static enum log_level max_level = LOG_INFO;

void sbx_log_set_level(enum log_level lvl)
{
    max_level = lvl;
}

void sbx_log(enum log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (lvl > max_level)
        return;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
