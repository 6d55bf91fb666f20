/* Coalesced audit of a process's binary stdin (docs/audit.md, docs/providers.md): a
 * program that feeds another through its stdin (sbx's own agent as a provider's process,
 * fed frames one SendInput at a time) would write one entry per call. Binary input (a NUL
 * byte, or bytes that are not UTF-8: never what a person types) is audited as its first
 * call's entry, then one entry per window ({calls, bytes, window_ms}, written when the
 * window ends) for the calls after it. Text input and PTY input keep one entry per call. */
#ifndef SBX_AUDIT_INPUT_WINDOW_H
#define SBX_AUDIT_INPUT_WINDOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct loop;
struct store;
struct auth_identity;

/* How long one window sums a process's binary input, and how many processes are summed
 * at once (past that, each call is its own entry again: nothing goes unrecorded). */
#define AUDIT_INPUT_WINDOW_MS 10000
#define AUDIT_INPUT_WINDOWS_MAX 256

struct audit_windows;
struct audit_windows *audit_windows_new(struct loop *loop, struct store *store);
/* Writes what the open windows summed, then frees. */
void audit_windows_free(struct audit_windows *w);

/* Is this input (n bytes at buf) binary, to be summed? */
bool audit_input_binary(const char *buf, size_t n);

/* One binary input of n bytes to process of sandbox by who: true when it gets its own
 * entry now (the first of a window, or no window free), false when it was summed into an
 * open window (whose entry, action with details {process, via, coalesced: {calls, bytes,
 * window_ms}}, is written when it ends). */
bool audit_window_take(struct audit_windows *w, const struct auth_identity *who,
                       const char *request_id, const char *action, const char *sandbox,
                       const char *process, const char *via, size_t n);

#endif
