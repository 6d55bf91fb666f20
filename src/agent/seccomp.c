/* A seccomp filter for everything in the sandbox, installed by the agent before it
 * runs anything and inherited by every command. TIOCSTI (faking terminal input) is
 * refused outright, so no process can push keystrokes into a terminal it does not
 * own, whatever the kernel underneath allows. */
#include "seccomp.h"

#include <errno.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

int agent_seccomp_install(struct sbx_err *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return sbx_err_set(err, ENOMEM, "internal", "seccomp_init failed");
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        r = -errno;
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    if (r < 0)
        return sbx_err_sys(err, -r, "installing the seccomp filter");
    return 0;
}
