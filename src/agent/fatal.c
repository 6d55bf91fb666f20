#include "fatal.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "agent.h"

_Noreturn void agent_die(struct agent *a, int code, const char *fmt, ...)
{
    if (fmt) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        dprintf(2, "sbx-agent: %s\n", msg);
    }
    if (a->on_fatal)
        a->on_fatal(a);
    _exit(code);
}
