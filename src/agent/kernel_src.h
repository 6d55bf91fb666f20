/* kernel/sbx_kernel.py, compiled in by the Makefile (build/gen/kernel_src.c). */
#ifndef SBX_AGENT_KERNEL_SRC_H
#define SBX_AGENT_KERNEL_SRC_H

extern const char sbx_kernel_src[];

#endif
