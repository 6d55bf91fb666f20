/* inputs on exec and run: [{path, content | content_base64 | url}], written into the
 * workspace (atomically, beneath it: workspace.h) before the command starts. Every
 * input is checked before any is written, so a bad one changes nothing.
 *
 * url inputs would be fetched by sbxd over HTTPS under the sandbox's egress policy.
 * Egress policies do not exist yet (issue 8) and every sandbox's policy is "none", so a
 * well-formed https url is refused with egress_denied; nothing is fetched. */
#ifndef SBX_INPUTS_H
#define SBX_INPUTS_H

#include <jansson.h>

#include "../common/err.h"

#define INPUTS_MAX 64

struct inputs;

/* *out is NULL when the body has no inputs. Errors: invalid_input, invalid_path,
 * egress_denied. */
int inputs_parse(json_t *body, struct inputs **out, struct sbx_err *err);
/* Write them beneath workspace_dir (NULL inputs: nothing to do). */
int inputs_write(const struct inputs *in, const char *workspace_dir, struct sbx_err *err);
void inputs_free(struct inputs *in);

#endif
