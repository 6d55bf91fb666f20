/* kernel/sbx_kernel.py and kernel/sbx_kernel.js, compiled in by the Makefile
 * (build/gen/kernel_src.c). */
#ifndef SBX_AGENT_KERNEL_SRC_H
#define SBX_AGENT_KERNEL_SRC_H

extern const char sbx_kernel_src[];
extern const char sbx_kernel_js_src[];

#endif
