#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int err_vset(struct sbx_err *err, int errnum, const char *code, const char *fmt, va_list ap)
{
    int ret = errnum > 0 ? -errnum : -EINVAL;
    if (!err)
        return ret;
    err->errnum = errnum > 0 ? errnum : EINVAL;
    snprintf(err->code, sizeof(err->code), "%s", code ? code : "internal");
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    return ret;
}

int sbx_err_set(struct sbx_err *err, int errnum, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int ret = err_vset(err, errnum, code, fmt, ap);
    va_end(ap);
    return ret;
}

int sbx_err_sys(struct sbx_err *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* A full disk is the operator's to fix, not a fault: it gets its own code (507). */
    int ret = err_vset(err, errnum,
                       errnum == ENOSPC || errnum == EDQUOT ? "insufficient_storage" : "internal",
                       fmt, ap);
    va_end(ap);
    if (err) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof(err->msg) - n, ": %s",
                 strerror(errnum > 0 ? errnum : EINVAL));
    }
    return ret;
}

int sbx_err_wrap(struct sbx_err *err, const char *fmt, ...)
{
    if (!err)
        return -EINVAL;
    char prefix[SBX_ERR_MSG_MAX];
    char old[SBX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    /* Truncation is fine here; using the result keeps -Wformat-truncation quiet at -O2. */
    if (snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old) < 0)
        err->msg[0] = '\0';
    return sbx_err_ret(err);
}

void sbx_err_clear(struct sbx_err *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
}

int sbx_err_ret(const struct sbx_err *err)
{
    return err && err->errnum > 0 ? -err->errnum : -EINVAL;
}
