/* The namespaces backend's seccomp filter (syscalls.c). Linked into the shim only. */
#ifndef SBX_SYSCALLS_H
#define SBX_SYSCALLS_H

#include <stddef.h>

/* Install the filter on the calling thread (no_new_privs must be set). Returns 0 or
 * -errno with why filled. */
int ns_seccomp_load(char *why, size_t why_size);

#endif
