/* E2B's template builds and the template routes around them (e2b_templates.c: builds,
 * uploads, status; e2b_template_tags.c: aliases, tags, GET and DELETE), on sbx's custom
 * templates (docs/e2b.md "Templates"). An E2B templateID is the sbx template name. */
#ifndef SBX_E2B_TEMPLATES_H
#define SBX_E2B_TEMPLATES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

#define E2B_BUILD_ID_LEN 36 /* a UUID */
#define E2B_DEFAULT_TAG "default"
#define E2B_TAGS_MAX 16   /* tags one request names */
#define E2B_TAG_MAX 64    /* one tag's length */

struct sbxd;
struct e2b_templates;

/* The builds asked for through E2B (kept in memory, like sbx's own build records). */
int e2b_templates_new(struct sbxd *d, struct e2b_templates **out, struct sbx_err *err);
void e2b_templates_free(struct e2b_templates *t);
/* Does user have a build of name waiting for its steps or under way? */
bool e2b_template_building(struct e2b_templates *t, const char *name, const char *user);

/* The sbx template an E2B template name starts from: E2B's base and code interpreter
 * names are sbx's base (which has the kernel); any other name is an sbx template. */
const char *e2b_template_base(const char *name);
/* "alias" or "alias:tag" (E2B's names, lower-cased as E2B does) into the sbx template name
 * (invalid_request unless it is one) and, when a tag other than "default" is given, tags
 * gets it. */
int e2b_parse_name(const char *in, char name[], json_t *tags, struct sbx_err *err);
/* A request's tags ([a-z0-9-_.], at most E2B_TAGS_MAX, none a UUID) appended to out
 * without repeats; NULL or null is none. */
int e2b_parse_tags(json_t *in, json_t *out, struct sbx_err *err);
/* Is name user's own custom template (0)? When it is not built, 0 if free_ok, else
 * template_not_found; the operator's or another user's: template_exists (free_ok) or
 * template_not_owner. */
int e2b_template_owned(struct sbxd *d, const char *name, const char *user, bool free_ok,
                       struct sbx_err *err);
/* A build that ended ready: it is the template's newest, and its tags name it. */
int e2b_tags_built(struct sbxd *d, const char *name, const char *build_id, const char *digest,
                   json_t *tags, struct sbx_err *err);
/* Sandbox.create's templateID ("name" or "name:tag") as the sbx template to create from,
 * into out: a tag must name the template's newest build (sbx serves that one only). */
int e2b_template_for_create(struct sbxd *d, const char *template_id, char *out, size_t cap,
                            struct sbx_err *err);

#endif
