/* Custom template builds (POST /v1/templates, docs/templates.md). A build copies its
 * parent template's tree, boots a sandbox of nobody on that copy mounted writable (gVisor,
 * egress only to SBX_TEMPLATE_REGISTRIES), runs apt, npm, the files, the run steps and the
 * ready check in it as commands, then stops it, hashes the tree and publishes it in the
 * template cache as <name>-<recipe digest>, where creates find it by name. Every step, log
 * line and the outcome are events that watchers (SSE) follow and late ones replay. */
#ifndef SBX_TEMPLATES_BUILD_H
#define SBX_TEMPLATES_BUILD_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/jobs.h"
#include "../../common/loop.h"
#include "../auth/auth.h"
#include "../config.h"
#include "../sandbox/manager.h"

#define TEMPLATE_BUILD_TTL_S 3600            /* the build sandbox's life: the whole build */
#define TEMPLATE_STEP_TIMEOUT_S 900          /* one step (= EXEC_TIMEOUT_MAX) */
#define TEMPLATE_BUILD_LOG_MAX (1024 * 1024) /* log text kept (and sent) per build */
#define TEMPLATE_LOG_LINE_MAX 4096           /* longer lines are split */
#define TEMPLATE_LOG_TAIL 4096               /* of a failed step's output, in its error */
#define TEMPLATE_READY_TIMEOUT_S 60          /* ready_check must pass within */
#define TEMPLATE_BUILD_WATCHERS_MAX 32       /* event streams following one build */
#define TEMPLATES_PER_USER_MAX 20            /* custom templates a user may own */
#define TEMPLATE_BUILD_ID_LEN 23             /* "tb_" + 20 hex */
#define TEMPLATE_BUILD_RECORDS_MAX 256       /* finished builds remembered (oldest go) */

struct template_builds;
struct template_build;

int template_builds_new(const struct sbxd_config *cfg, struct loop *l, struct manager *m,
                        struct jobs *j, struct template_builds **out, struct sbx_err *err);
void template_builds_free(struct template_builds *b);

/* POST /v1/templates: start a build of body's recipe for who, join the same recipe's build
 * under way, or (*cached) find it built already: then *out is a finished build record.
 * Errors: invalid_recipe, invalid_template, admin_required (public without admin),
 * template_exists (the name is the operator's or another user's), template_building
 * (another recipe of the name is being built), template_build_limit, template_limit. */
int template_build_start(struct template_builds *b, const struct auth_identity *who, json_t *body,
                         struct template_build **out, bool *cached, struct sbx_err *err);
/* The same, with files the daemon copies into the build sandbox's inputs dir
 * (TEMPLATE_INPUTS_DIR, beside the recipe's files) before any step runs: inputs is an
 * array of {"name": "<name in the inputs dir>", "path": "<host path>"} (the E2B surface's
 * uploaded archives, e2b/e2b_templates.c). Their contents are not part of the recipe
 * digest: the caller names them by their sha256 in the steps that use them. */
#define TEMPLATE_INPUTS_DIR "/workspace/.sbx-build"
#define TEMPLATE_INPUTS_MAX 32                       /* inputs of one build */
#define TEMPLATE_INPUTS_BYTES (128ll * 1024 * 1024) /* all inputs together */
int template_build_start_with(struct template_builds *b, const struct auth_identity *who,
                              json_t *body, json_t *inputs, struct template_build **out,
                              bool *cached, struct sbx_err *err);
/* The operator's templates (templates/NAME: base, office, desktop) as `make run` builds
 * them: scripts/build-template.sh NAME (SBX_TEMPLATE_SCRIPT) run on the host, followed as a
 * build record (steps "script", its output as log lines, and "check", the template read
 * back), or the one under way joined. Errors: template_building (a custom build of the
 * name runs), template_build_limit, template_build_failed (the script cannot start). */
int template_build_operator(struct template_builds *b, const char *name,
                            struct template_build **out, struct sbx_err *err);
const char *template_build_id(const struct template_build *tb);
/* Has the build ended (*ready: with its template built)? */
bool template_build_ended(const struct template_build *tb, bool *ready);
/* The last build of a template name that user may see, or NULL. */
struct template_build *template_build_find(struct template_builds *b, const char *name,
                                           const char *user);
/* The build with this id (tb_...) among those remembered, or NULL. */
struct template_build *template_build_by_id(struct template_builds *b, const char *id);
/* Its events so far (borrowed; see template_build_watch for their shapes), and whether it
 * ended: "building", "ready" or "failed". */
json_t *template_build_events(const struct template_build *tb);
const char *template_build_status(const struct template_build *tb);
/* Is a build of this name under way? */
bool template_build_running(struct template_builds *b, const char *name);
/* DELETE /v1/templates/{name}: its owner's (or an admin's). Errors: template_not_found,
 * template_builtin, template_not_owner, template_building, template_in_use (any live or
 * paused sandbox of it). */
int template_delete(struct template_builds *b, const struct auth_identity *who, const char *name,
                    struct sbx_err *err);
/* Forget the finished build records of a deleted template. */
void template_build_forget(struct template_builds *b, const char *name);
/* {object: "template_build", id, name, status, step, percent, recipe_digest, ...}. */
json_t *template_build_json(const struct template_build *tb);

/* Follow a build: on_event gets (a new reference to) every event so far, then each new one;
 * on_end runs after the last (at once for a finished build). -EBUSY past
 * TEMPLATE_BUILD_WATCHERS_MAX. */
struct template_watch_ops {
    void (*on_event)(json_t *event, void *data);
    void (*on_end)(void *data);
};
int template_build_watch(struct template_build *tb, const struct template_watch_ops *ops,
                         void *data);
void template_build_unwatch(struct template_build *tb, void *data);

#endif
