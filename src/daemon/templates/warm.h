/* Warm memory snapshots of templates: SBX_WARM_SNAPSHOT=office boots one sandbox of the
 * template for nobody, runs the template's /usr/lib/sbx/warm in it (office: LibreOffice
 * starts once) and pauses it. Its checkpoint image is then what every create of that
 * template (and every pooled sandbox of it) restores from: `restored: true` and
 * `ready_ms` on the create, and the warm-up already done inside. See docs/templates.md. */
#ifndef SBX_TEMPLATES_WARM_H
#define SBX_TEMPLATES_WARM_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../config.h"
#include "../sandbox/manager.h"

#define WARM_SCRIPT "/usr/lib/sbx/warm" /* in the template's tree */
#define WARM_TIMEOUT_S 300

struct warm_images;

/* Parse cfg->warm_snapshot (NULL: none) and start taking the snapshots. */
int warm_images_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                    struct warm_images **out, struct sbx_err *err);
void warm_images_free(struct warm_images *w);
/* The image to restore a new sandbox of this template build from, with the boot id its
 * agent answers with; NULL when there is none (yet). */
const char *warm_images_find(struct warm_images *w, const char *template_name, const char *digest,
                             char boot_id[33]);
/* For GET /v1/templates: "none", "warming", "ready" or "failed". */
const char *warm_images_state(struct warm_images *w, const char *template_name);

#endif
