/* The namespaces backend's seccomp filter. syscalls.c holds the rules and is linked into
 * the build-time generator only (ns_filter_gen.c); what it generated is linked into the
 * shim, which loads it as it is. */
#ifndef SBX_SYSCALLS_H
#define SBX_SYSCALLS_H

#include <stddef.h>

/* The filter as BPF (struct sock_filter, native byte order) written to fd. Returns 0 or
 * -errno with why filled. */
int ns_seccomp_export(int fd, char *why, size_t why_size);

/* build/gen/ns_seccomp.c: what ns_seccomp_export wrote at build time. */
extern const unsigned char ns_seccomp_bpf[];
extern const unsigned int ns_seccomp_bpf_len;

#endif
