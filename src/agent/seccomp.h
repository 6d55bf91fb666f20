#ifndef SBX_AGENT_SECCOMP_H
#define SBX_AGENT_SECCOMP_H

#include "../common/err.h"

/* Install the agent's syscall filter, inherited by every command it runs. */
int agent_seccomp_install(struct sbx_err *err);

#endif
