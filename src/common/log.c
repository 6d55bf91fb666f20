#include "log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The process-wide settings: chosen once by main before anything runs. */
static enum log_level max_level = LOG_INFO;
static bool json_lines;
/* What the loop is serving while a handler runs (set around it by the router). */
static char ctx_request[64], ctx_user[128];

void sbx_log_set_level(enum log_level lvl)
{
    max_level = lvl;
}

void sbx_log_set_json(bool on)
{
    json_lines = on;
}

void sbx_log_context(const char *request_id, const char *user)
{
    snprintf(ctx_request, sizeof(ctx_request), "%s", request_id ? request_id : "");
    snprintf(ctx_user, sizeof(ctx_user), "%s", user ? user : "");
}

/* s as the inside of a JSON string: quotes, backslashes and control bytes escaped. */
static size_t json_escape(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            dst[n++] = '\\';
            dst[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", c);
        } else {
            dst[n++] = (char)c;
        }
    }
    dst[n] = '\0';
    return n;
}

/* The first sandbox id the message names ("sb_" and hex), so lines can be filtered by it. */
static void sandbox_in(const char *msg, char *out, size_t cap)
{
    out[0] = '\0';
    for (const char *p = strstr(msg, "sb_"); p; p = strstr(p + 3, "sb_")) {
        size_t n = 0;
        while (isxdigit((unsigned char)p[3 + n]))
            n++;
        if (n >= 8 && (p == msg || !isalnum((unsigned char)p[-1])) && n + 4 <= cap) {
            snprintf(out, cap, "%.*s", (int)(n + 3), p);
            return;
        }
    }
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
    char stamp[80], msg[2048];
    snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!json_lines) {
        fprintf(stderr, "%s %s %s\n", stamp, names[lvl], msg);
        return;
    }
    char emsg[6 * sizeof(msg)], sb[48], euser[6 * sizeof(ctx_user)];
    json_escape(emsg, sizeof(emsg), msg);
    json_escape(euser, sizeof(euser), ctx_user);
    sandbox_in(msg, sb, sizeof(sb));
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"", stamp, names[lvl], emsg);
    if (ctx_request[0])
        fprintf(stderr, ",\"request_id\":\"%s\"", ctx_request);
    if (ctx_user[0])
        fprintf(stderr, ",\"user\":\"%s\"", euser);
    if (sb[0])
        fprintf(stderr, ",\"sandbox\":\"%s\"", sb);
    fputs("}\n", stderr);
}
