/* A custom template's recipe (POST /v1/templates): parsed, checked against named limits
 * and normalised, so that the same recipe always has the same digest. docs/templates.md. */
#ifndef SBX_TEMPLATES_RECIPE_H
#define SBX_TEMPLATES_RECIPE_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define RECIPE_APT_MAX 64               /* apt_packages */
#define RECIPE_NPM_MAX 64               /* npm_packages */
#define RECIPE_PACKAGE_MAX 214          /* one package spec (npm's name limit) */
#define RECIPE_FILES_MAX 32             /* files */
#define RECIPE_FILE_PATH_MAX 1024       /* a file's path */
#define RECIPE_FILES_BYTES (512 * 1024) /* all files' contents together */
#define RECIPE_RUN_MAX 32               /* run steps */
#define RECIPE_COMMAND_MAX 8192         /* one run step, start_command, ready_check */

struct recipe {
    json_t *doc; /* normalised: every field present, in one order (owned) */
    const char *name;
    const char *from;
    json_t *apt;               /* array of strings (in doc) */
    json_t *npm;               /* array of strings */
    json_t *files;             /* array of {path, content, mode} */
    json_t *run;               /* array of strings */
    const char *start_command; /* NULL when absent */
    const char *ready_check;   /* NULL when absent */
    bool public_given, public_;
};

/* Parse a POST /v1/templates body. Errors: invalid_recipe (400) naming the field and the
 * limit, invalid_template for a bad name. */
int recipe_parse(json_t *body, struct recipe *out, struct sbx_err *err);
void recipe_clear(struct recipe *r);
/* The recipe digest (64 hex): its normalised document, without the name and the public
 * flag, the parent's content digest and what the operator's settings change in a build
 * (apt sources, npm registry). */
void recipe_digest(const struct recipe *r, const char *from_digest, const char *apt_sources,
                   const char *npm_registry, char out[65]);

#endif
