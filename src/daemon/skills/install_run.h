/* One round of a skill install (install_run.c): queued behind the configuration's other
 * rounds, then a sandbox, the bundle, the script, the snapshot. Its progress events and
 * transcript are kept in memory for late subscribers; the outcome goes to the store. */
#ifndef SBX_SKILLS_INSTALL_RUN_H
#define SBX_SKILLS_INSTALL_RUN_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"
#include "../store/store.h"

struct sbxd;
struct http_req;
struct install_run;

struct installs {
    struct sbxd *d;
    char *dir; /* <data>/skill-installs: snapshots/, transcripts/ */
    struct install_run *runs;
    /* Running sandboxes whose skills changed since they started: brought up to date at
     * their next command (skill_rollout next_turn), {sandbox_id: true}. */
    json_t *stale;
};

/* installs.c: a configuration's skills changed; its running sandboxes get them at their
 * next command unless it says skill_rollout new_session. */
void installs_rollout(struct installs *ins, const char *config_id);
/* installs.c: the bundle at bundle (a catalog entry's folder) as <skills_dir>/<name>,
 * replacing what was there, safely beneath a workspace a sandbox may be changing. */
int installs_place(const char *bundle, int skills_dir, const char *name, struct sbx_err *err);
/* Whether sandbox_id is a round's install sandbox. */
bool install_run_owns_sandbox(struct installs *ins, const char *sandbox_id);

/* rec: stored already with status installing and its round's message_id. */
void install_run_begin(struct installs *ins, const struct auth_identity *who,
                       const struct store_skill_install *rec, const char *instructions);
struct install_run *install_run_find(struct installs *ins, const char *skill_id);
bool install_run_active(const struct install_run *run);
/* End an active round as failed (stopped by who). */
void install_run_stop(struct install_run *run, const char *who);
/* Forget a round (its install is deleted): stopped first when active. */
void install_run_forget(struct installs *ins, const char *skill_id);
void install_run_free_all(struct installs *ins);

json_t *install_run_guidance(const struct install_run *run);
int install_run_guide(struct install_run *run, const char *message_id, const char *steer_id,
                      const char *content, struct sbx_err *err);
/* NULL run: a round this daemon did not run (its transcript from disk, if any). */
int install_run_follow(struct installs *ins, struct install_run *run,
                       const struct store_skill_install *rec, bool transcript, struct http_req *req,
                       struct sbx_err *err);

/* <dir>/snapshots/<id>/workspace.img or .../workspace, whichever there is (malloc'd),
 * or NULL. */
char *install_snapshot_path(struct installs *ins, const char *snapshot_id);
/* Remove a snapshot nothing names any more. */
void install_snapshot_gc(struct installs *ins, const char *snapshot_id);

#endif
