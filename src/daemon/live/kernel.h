/* The daemon's side of a sandbox's persistent Python kernel (docs/kernel.md): one cell at a
 * time through the agent's kernel_run op, kernel_reset and kernel_interrupt, and the
 * llm_query calls a cell makes, which sbxd performs (llm.h). */
#ifndef SBX_KERNEL_H
#define SBX_KERNEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

/* A cell travels in one OPEN frame (256 KiB, JSON-escaped): this leaves room for escapes. */
#define KERNEL_CODE_MAX (128u * 1024u)
#define KERNEL_TIMEOUT_DEFAULT 300
#define KERNEL_TIMEOUT_MAX 900
/* One message line from the kernel (the agent's bound too). */
#define KERNEL_LINE_MAX (8u * 1024u * 1024u)
/* Rich outputs of one cell, base64 included; later ones are dropped and flagged. */
#define KERNEL_OUTPUTS_MAX (16u * 1024u * 1024u)
/* An llm reply line sent down to the kernel (the agent accepts 2 MiB). */
#define KERNEL_LLM_REPLY_MAX (1024u * 1024u)

struct sandbox;
struct llm;
struct kernel_run;
struct kernel_ctl;

struct auth_identity;
struct kernel_params {
    const char *code; /* borrowed from the request */
    long long timeout_s;
    /* Who runs it: the "run_code" audit entry (audit_command_details of the code, via) is
     * written once the cell reached the agent. who NULL: the sandbox's owner. */
    const struct auth_identity *who;
    const char *request_id;
    const char *via; /* "rest", "tool", "e2b" */
    /* NULL: the kernel's main namespace; else the name of a namespace of its own (E2B's code
     * contexts), made on first use and kept until the kernel restarts. */
    const char *context;
    /* NULL or "python": a Python cell; "js" or "ts": JavaScript or TypeScript, run by the
     * kernel's node process (kernel/sbx_kernel.js), in a vm context per context name. */
    const char *language;
};

/* Parse {code, timeout_seconds}. */
int kernel_params_parse(json_t *body, struct kernel_params *out, struct sbx_err *err);

/* How a requester follows a cell; every callback is optional. on_output sees the stdout
 * (ch 1) and stderr (ch 2) bytes that are kept, on_display each rich output {mime, data}
 * (borrowed), and on_done runs once with the answer (borrowed) or an error. */
struct kernel_observer {
    void (*on_output)(unsigned ch, const uint8_t *buf, size_t len, void *data);
    void (*on_display)(json_t *output, void *data);
    void (*on_done)(json_t *answer, const struct sbx_err *err, void *data);
};

/* Run one cell. llm may be NULL (llm_query then raises "not configured" in the cell). */
int kernel_run_start(struct sandbox *sb, struct llm *llm, const struct kernel_params *p,
                     const struct kernel_observer *obs, void *data, struct kernel_run **out,
                     struct sbx_err *err);
/* The requester went away: the cell runs on, its answer is dropped. */
void kernel_run_abandon(struct kernel_run *run);

/* kernel_reset or kernel_interrupt; cb gets the agent's EXIT payload or an error. */
typedef void (*kernel_ctl_fn)(json_t *result, const struct sbx_err *err, void *data);
int kernel_control(struct sandbox *sb, const char *op, kernel_ctl_fn cb, void *data,
                   struct kernel_ctl **out, struct sbx_err *err);
void kernel_ctl_abandon(struct kernel_ctl *c);

#endif
