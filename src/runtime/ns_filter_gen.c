/* Build time: the namespaces backend's seccomp filter (syscalls.c) as BPF on stdout, for
 * make to compile into the shim (build/gen/ns_seccomp.c). */
#include <stdio.h>

#include "syscalls.h"

int main(void)
{
    char why[256];
    if (ns_seccomp_export(1, why, sizeof(why)) < 0) {
        fprintf(stderr, "ns_filter_gen: %s\n", why);
        return 1;
    }
    return 0;
}
