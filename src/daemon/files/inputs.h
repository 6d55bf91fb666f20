/* inputs on exec and run: [{path, content | content_base64 | url}], written into the
 * workspace (atomically, beneath it: workspace.h) before the command starts. Every
 * input is checked before any is written, so a bad one changes nothing.
 *
 * url inputs are fetched by sbxd itself (fetch.h), one after the other, before anything is
 * written, whatever the sandbox's egress policy: the sandbox gets bytes, never network. A
 * request's url inputs share one budget of bytes and one of time (inputs_limits). */
#ifndef SBX_INPUTS_H
#define SBX_INPUTS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define INPUTS_MAX 64

struct inputs;

struct egress_proxy;
struct jobs;

/* What one request's url inputs may take in all (SBX_INPUT_URL_MAX_BYTES,
 * SBX_INPUT_URL_TIMEOUT_SECONDS). */
struct inputs_limits {
    size_t max_bytes;
    long long timeout_ms;
};

/* One url input's fetch, done or failed (err), for the caller's log and audit entry. */
struct inputs_fetch_note {
    size_t index;
    const char *path, *url, *host;
    const char *addr; /* the address dialled, "" when it never got one */
    size_t bytes;
    long long ms;
    const struct sbx_err *err; /* NULL: fetched */
};

/* *out is NULL when the body has no inputs. Errors: invalid_input, invalid_path. */
int inputs_parse(json_t *body, struct inputs **out, struct sbx_err *err);
/* Are there url inputs still to fetch? */
bool inputs_need_fetch(const struct inputs *in);
/* Fetch every url input, one after the other, within lim; note runs on the loop after each
 * fetch that started (also a refused one), then cb once, err NULL when all arrived
 * (invalid_input, egress_denied, input_too_large, input_fetch_failed otherwise). inputs_free
 * cancels a fetch in progress without calling back. */
typedef void (*inputs_fetched_fn)(const struct sbx_err *err, void *arg);
typedef void (*inputs_note_fn)(const struct inputs_fetch_note *note, void *arg);
void inputs_fetch(struct inputs *in, struct egress_proxy *px, struct jobs *jobs,
                  const char *ca_file, const struct inputs_limits *lim, inputs_note_fn note,
                  inputs_fetched_fn cb, void *arg);
/* Write them beneath workspace_dir (NULL inputs: nothing to do). */
int inputs_write(const struct inputs *in, const char *workspace_dir, struct sbx_err *err);
void inputs_free(struct inputs *in);

#endif
