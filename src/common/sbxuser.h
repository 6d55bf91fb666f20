/* The unprivileged account commands run as inside a sandbox (docs/security.md): the
 * agent switches to it before exec, and sbxd gives it what it writes into a workspace. */
#ifndef SBX_SBXUSER_H
#define SBX_SBXUSER_H

#define SBX_USER_UID 1000
#define SBX_USER_GID 1000
#define SBX_USER_NAME "user"
#define SBX_USER_HOME "/home/user"

#endif
