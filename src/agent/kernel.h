/* The persistent Python kernel: one long-lived python3 per sandbox (kernel/sbx_kernel.py,
 * compiled into the agent), owned here and driven by three ops (docs/protocol.md):
 *
 *   kernel_run        one cell; stdout/stderr as DATA 1/2, the kernel's messages (rich
 *                     outputs, llm requests, the cell's result) as DATA 3 lines; DATA 0 from
 *                     the daemon (llm replies) goes to the kernel verbatim
 *   kernel_reset      kill the kernel and start a new one; EXIT once it is ready
 *   kernel_interrupt  SIGINT to the running cell's process group
 *
 * The kernel talks to the agent over a unix socket (lines of JSON); its stdout and stderr
 * are pipes that the agent streams to the running cell, or discards between cells. */
#ifndef SBX_AGENT_KERNEL_H
#define SBX_AGENT_KERNEL_H

/* Longest name of a separate namespace (kernel_run "context"). */
#define KERNEL_CONTEXT_MAX 64

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/err.h"

struct agent;

/* Longest message line the kernel may send (a rich output is one line). */
#define KERNEL_LINE_MAX (8u * 1024u * 1024u)
/* Bytes waiting to be written to the kernel: a cell's request (at most one frame) plus what
 * the daemon may send on channel 0 (llm replies, one at a time). */
#define KERNEL_DOWN_MAX (2u * 1024u * 1024u)
/* A kernel that has not said "ready" by then is killed. */
#define KERNEL_START_TIMEOUT_MS 30000

int kernel_run_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int kernel_reset_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int kernel_interrupt_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

/* This agent is one of several copies restored from one image (a fork): SIGUSR2 tells a
 * running kernel to reseed the random generators it holds (kernel/sbx_kernel.py). */
void kernel_forked(struct agent *a);

/* A child no stream owns was reaped: it may be the kernel. */
void kernel_reaped(struct agent *a, pid_t pid, int status);

#endif
