/* Skills installed into sandbox configurations (docs/skills.md): each install of a
 * catalog entry runs in a fresh sandbox of the configuration, places the bundle at
 * /workspace/skills/<name>, runs the skill's install script and keeps the workspace as a
 * snapshot the configuration's sandboxes then start from. Rounds of one configuration
 * run one at a time, in order, each on top of the last one that worked. */
#ifndef SBX_SKILLS_INSTALLS_H
#define SBX_SKILLS_INSTALLS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"
#include "../store/store.h"

#define INSTALL_INSTRUCTIONS_MAX 10000 /* characters */
#define INSTALL_GUIDANCE_MAX 10000     /* characters a message */
#define INSTALL_GUIDANCE_MSGS_MAX 100  /* a round */
#define INSTALL_STEER_ID_MAX 64
#define INSTALL_EVENTS_MAX 2000 /* kept for a late subscriber; the rest is counted */
#define INSTALL_LOG_CHUNK_MAX 4096
#define INSTALL_LOG_KEPT_MAX (1024u * 1024u) /* of a round's output; the rest is dropped */
#define INSTALL_SCRIPT_TIMEOUT_S 900
#define INSTALL_CONFIGS_MAX 50 /* sandbox_config_ids in one catalog install */
#define INSTALL_PARALLEL_MAX 2 /* rounds at once (of different configurations) */
/* Whose install sandboxes are: a name no key can have (':' is not allowed in users). */
#define INSTALL_USER "sbx:skills"
#define INSTALL_SKILLS_DIR "skills" /* beneath the workspace */
#define INSTALL_TREE_DEPTH_MAX 64
#define INSTALL_CTL_DIR ".sbx-install"
/* A released snapshot (its configuration deleted) waiting for removal, in snapshots/. */
#define INSTALL_RELEASED_PREFIX ".released-"

struct sbxd;
struct http_req;
struct installs;

int installs_new(struct sbxd *d, struct installs **out, struct sbx_err *err);
void installs_free(struct installs *ins);

/* Install catalog entry catalog_id into a configuration: a new install, or a new round
 * of the configuration's install of that name. skill_id: the install's id. */
int installs_start(struct installs *ins, const struct auth_identity *who, const char *config_id,
                   const char *catalog_id, char skill_id[STORE_ID_MAX + 1], struct sbx_err *err);
/* A new round from the same bundle; instructions NULL or at most INSTALL_INSTRUCTIONS_MAX. */
int installs_reinstall(struct installs *ins, const struct auth_identity *who, const char *config_id,
                       const char *skill_id, const char *instructions, struct sbx_err *err);
/* While installing: the round ends failed; on a failed one: its state again; otherwise
 * skill_not_installing (409). *out: the install. */
int installs_stop(struct installs *ins, const struct auth_identity *who, const char *config_id,
                  const char *skill_id, json_t **out, struct sbx_err *err);

int installs_list(struct installs *ins, const char *config_id, json_t **out, struct sbx_err *err);
int installs_get(struct installs *ins, const char *config_id, const char *skill_id, json_t **out,
                 struct sbx_err *err);
/* {enabled?, envs?}: envs names the skill does not declare are ignored (listed in
 * *ignored), "" clears a value. */
int installs_patch(struct installs *ins, const char *config_id, const char *skill_id,
                   const json_t *body, json_t **out, json_t **ignored, struct sbx_err *err);
/* The install goes; its catalog entry stays. */
int installs_delete(struct installs *ins, const char *config_id, const char *skill_id,
                    struct sbx_err *err);
/* The bundle of the install's current round (its catalog entry's id). */
int installs_catalog_id(struct installs *ins, const char *config_id, const char *skill_id,
                        char out[STORE_SKILL_ID_MAX + 1], struct sbx_err *err);

/* {accepting, messages:[{id, content, status}]} of the current round. */
int installs_guidance(struct installs *ins, const char *config_id, const char *skill_id,
                      json_t **out, struct sbx_err *err);
/* install_moved_on (409) when expected_message_id is not the current round's, or the
 * round no longer runs; a steer_id seen before adds nothing. */
int installs_guide(struct installs *ins, const char *config_id, const char *skill_id,
                   const char *expected_message_id, const char *steer_id, const char *content,
                   struct sbx_err *err);

/* Answer req with the round's progress (or its transcript) as SSE: everything so far,
 * then live until the round ends. transcript_not_ready (204) before it has a step. */
int installs_follow(struct installs *ins, const char *config_id, const char *skill_id,
                    bool transcript, struct http_req *req, struct sbx_err *err);

/* GET /v1/skills?sandbox_config_id=: what an agent of that configuration may use. */
int installs_agent_list(struct installs *ins, const char *config_id, json_t **out,
                        struct sbx_err *err);

#endif
