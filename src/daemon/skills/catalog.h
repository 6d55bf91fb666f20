/* The skill catalog (docs/skills.md): skills shipped with sbx (skills/ in the checkout,
 * SBX_SKILLS_DIR) and bundles uploaded or fetched from the operator's skill index
 * (SBX_SKILL_INDEX_URL), each unpacked under <data>/skills/<id> with its SKILL.md checked
 * and a row in the store. Unpacking and fetching run on worker threads. */
#ifndef SBX_SKILLS_CATALOG_H
#define SBX_SKILLS_CATALOG_H

#include <jansson.h>

#include "../../common/err.h"
#include "../../common/jobs.h"
#include "../config.h"
#include "../store/store.h"
#include "frontmatter.h"

#define SKILL_FILE_TEXT_MAX (1024u * 1024u) /* a file answered inline as text */
#define SKILL_FILE_IMAGE_MAX (256u * 1024u) /* ... or as base64, for an image */
#define SKILL_FILES_MAX 1000
#define SKILL_SOURCE_MAX 128

struct skills;

/* Makes <data>/skills and adds (or refreshes) every shipped skill. */
int skills_new(const struct sbxd_config *cfg, struct store *st, struct jobs *jobs,
               struct skills **out, struct sbx_err *err);
void skills_free(struct skills *k);

/* err NULL: item is the new catalog entry (owned by the callee). */
typedef void (*skills_added_fn)(json_t *item, const struct sbx_err *err, void *data);
/* Take a bundle written to fd (owned: closed here) into the catalog. reuse: a bundle the
 * catalog already has (same name, version and digest) is that entry, not skill_exists. */
void skills_add_bundle(struct skills *k, int fd, const char *source, const char *owner, bool reuse,
                       skills_added_fn cb, void *data);
/* "@owner/slug" from the skill index (invalid_source, skill_index_unavailable). Errors
 * about the source itself are returned at once; cb hears the rest. */
int skills_add_source(struct skills *k, const char *source, const char *owner, bool reuse,
                      skills_added_fn cb, void *data, struct sbx_err *err);

int skills_list(struct skills *k, json_t **out, struct sbx_err *err);
int skills_get(struct skills *k, const char *id, json_t **out, struct sbx_err *err);
/* [{path, size, sha256}] of the skill's files. */
int skills_files(struct skills *k, const char *id, json_t **out, struct sbx_err *err);
/* One file: UTF-8 text inline, a small image as base64, anything else as metadata.
 * Paths are resolved beneath the skill (invalid_path, file_not_found). */
int skills_file_content(struct skills *k, const char *id, const char *path, json_t **out,
                        struct sbx_err *err);
/* An entry's SKILL.md, read again (its install script is not in the row). */
int skills_meta(struct skills *k, const char *id, struct skill_meta *out, struct sbx_err *err);
/* <data>/skills/<id> (malloc'd). */
char *skills_path(struct skills *k, const char *id);
/* An install's served: {version} of the last ready round, or null. */
json_t *skills_served_json(const struct store_skill_install *i);
/* skill_builtin for a shipped one (it would come back at the next start), skill_in_use
 * while a configuration's install names it. */
int skills_delete(struct skills *k, const char *id, struct sbx_err *err);

#endif
