/* inputs on exec and run: [{path, content | content_base64 | url}], written into the
 * workspace (atomically, beneath it: workspace.h) before the command starts. Every
 * input is checked before any is written, so a bad one changes nothing.
 *
 * url inputs are fetched by sbxd (fetch.h) under the sandbox's egress policy, before
 * anything is written. */
#ifndef SBX_INPUTS_H
#define SBX_INPUTS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define INPUTS_MAX 64

struct inputs;

struct egress_proxy;
struct egress_policy;
struct jobs;

/* *out is NULL when the body has no inputs. Errors: invalid_input, invalid_path. */
int inputs_parse(json_t *body, struct inputs **out, struct sbx_err *err);
/* Are there url inputs still to fetch? */
bool inputs_need_fetch(const struct inputs *in);
/* Fetch every url input, one after the other; cb runs once on the loop, err NULL when all
 * arrived (egress_denied, input_too_large, input_fetch_failed otherwise). inputs_free
 * cancels a fetch in progress without calling back. */
typedef void (*inputs_fetched_fn)(const struct sbx_err *err, void *arg);
void inputs_fetch(struct inputs *in, struct egress_proxy *px, struct jobs *jobs,
                  const struct egress_policy *policy, const char *ca_file, inputs_fetched_fn cb,
                  void *arg);
/* Write them beneath workspace_dir (NULL inputs: nothing to do). */
int inputs_write(const struct inputs *in, const char *workspace_dir, struct sbx_err *err);
void inputs_free(struct inputs *in);

#endif
