/* Errors as crun does them: functions return 0 or a negative errno and fill a
 * struct sbx_err. The API code (e.g. "sandbox_busy") travels with the error so
 * the HTTP layer can map it to a status in exactly one place (http/errors.c). */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stdarg.h>

#define SBX_ERR_MSG_MAX 512
#define SBX_ERR_CODE_MAX 48

struct sbx_err {
    int errnum;                  /* positive errno, 0 when not from the system */
    char code[SBX_ERR_CODE_MAX]; /* API error code; "internal" when unset */
    char msg[SBX_ERR_MSG_MAX];
};

/* Fill err and return -errnum (or -EINVAL when errnum is 0). err may be NULL. */
int sbx_err_set(struct sbx_err *err, int errnum, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Like sbx_err_set with strerror(errnum) appended to the message. */
int sbx_err_sys(struct sbx_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix the message with context ("starting sandbox: ..."), keeping the code. */
int sbx_err_wrap(struct sbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbx_err_clear(struct sbx_err *err);
/* Return value convention helper: -errnum of a filled error. */
int sbx_err_ret(const struct sbx_err *err);

#endif
