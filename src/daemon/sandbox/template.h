/* Templates: read-only root filesystems built by scripts/build-template.sh into the
 * template cache as <cache>/<name> -> <name>-<recipe digest>/{rootfs,manifest.json}. */
#ifndef SBX_TEMPLATE_H
#define SBX_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define TEMPLATE_NAME_MAX 32
#define TEMPLATE_DIGEST_MAX 80
#define TEMPLATE_OWNER_MAX 64 /* = AUTH_USER_MAX */

struct template_info {
    char name[TEMPLATE_NAME_MAX + 1];
    char digest[TEMPLATE_DIGEST_MAX + 1]; /* "sha256:<content digest>" */
    char *rootfs;                         /* owned */
    /* A custom template's (built by POST /v1/templates, docs/templates.md): the user who
     * made it and whether every user may use it; "" for the operator's templates. */
    char owner[TEMPLATE_OWNER_MAX + 1];
    bool shared;
};

bool template_name_valid(const char *name);
/* A built template's manifest.json (it has a content_digest) and, when dir is not NULL, the
 * directory the name points at now; invalid_template when it is not there. */
int template_load(const char *cache, const char *name, json_t **manifest, char **dir,
                  struct sbx_err *err);
/* invalid_template for a template that is not built here (or not the caller's to use: the
 * same answer), saying how to build it: the operator's recipes in templates/ with
 * scripts/build-template.sh, any other name as a custom template. Returns -ENOENT. */
int template_not_built(const char *name, struct sbx_err *err);
/* Resolve a built template; invalid_template when it is not there. */
int template_resolve(const char *cache, const char *name, struct template_info *out,
                     struct sbx_err *err);
void template_info_clear(struct template_info *t);
/* May user see and use the template whose manifest this is? The operator's templates and
 * shared custom ones: everyone; a private custom one: its owner; user "" (the daemon's own
 * sandboxes: pools, warm snapshots): every one. */
bool template_visible(json_t *manifest, const char *user);
bool template_usable(const char *owner, bool shared, const char *user);

#endif
