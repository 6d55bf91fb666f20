/* Sandbox configurations (docs/configs.md): named documents an admin keeps, from which
 * sandboxes are made (POST /v1/sandboxes {config_id}), with their inventory, safe
 * change (409 while sandboxes live, 423 while another request holds the
 * configuration) and the personal variables users set for them. */
#ifndef SBX_CONFIGS_H
#define SBX_CONFIGS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/jobs.h"
#include "../sandbox/manager.h"
#include "../store/store.h"
#include "config_doc.h"
#include "secrets.h"

/* How long a request may hold a configuration (a change, a deep probe). */
#define CONFIGS_LOCK_MS 120000
/* What a configuration the probe was sent (not stored) is sealed under meanwhile. */
#define CONFIGS_PROBE_ID "cfg_probe"
/* What a sandbox's copy of its configuration's variables is sealed under. */
#define CONFIGS_SANDBOX_ENV_CONTEXT "sandbox:config_env"
#define CONFIGS_SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"
#define CONFIGS_ROOTS_MAX (4 * 1024 * 1024)

struct configs {
    struct store *store;
    struct manager *mgr;
    struct secrets *secrets;
    struct config_ceilings ceil;
    char *docker_host;  /* the docker backend's engine (SBX_DOCKER_HOST): the inventory's */
    char *trust_bundle; /* the host's roots and the egress CA, or NULL without a CA */
    /* What skills installed into a configuration give its sandboxes (skills/installs.c):
     * fn adds it to p, keeping what p points to in hold. */
    int (*skills_fn)(void *data, const char *config_id, struct sandbox_params *p, json_t *hold,
                     struct sbx_err *err);
    /* Before a configuration is deleted, its skill snapshot is moved aside (skills/):
     * *from and *parked (malloc'd, NULL when it has none) say where it was and is, so
     * that the delete can put it back or remove it; skill_snapshot_release_failed. */
    int (*snapshot_park_fn)(void *data, const char *config_id, char **from, char **parked,
                            struct sbx_err *err);
    void *skills_data;
};

/* Opens <data>/secrets.key and makes the manager create sandboxes from configurations.
 * ca_pem: the egress proxy's CA (egress_proxy_ca_pem), or NULL. */
int configs_new(const struct sbxd_config *cfg, struct store *st, struct manager *mgr,
                const char *ca_pem, struct configs **out, struct sbx_err *err);
void configs_free(struct configs *c);

/* A stored configuration and its document (sealed). */
struct config_loaded {
    struct store_config rec;
    json_t *doc;
};
int configs_load(struct configs *c, const char *id, struct config_loaded *out, struct sbx_err *err);
void config_loaded_clear(struct config_loaded *l);
/* {id, object, name, description, sandbox_type, config (masked), created_at, updated_at}. */
json_t *configs_to_json(const struct config_loaded *l);

/* What a configuration's backend says of its sandboxes: a docker configuration's engine
 * (docs/runtime.md "Docker"), the containers labelled with the configuration as it lists
 * them; a provider's, the provider's list (docs/providers.md). */
struct configs_engine_answer {
    bool asked;   /* a docker configuration: its engine was asked */
    json_t *list; /* the engine's containers, NULL when it did not answer (why says why) */
    char why[SBX_ERR_MSG_MAX];
    char code[SBX_ERR_CODE_MAX]; /* why's error code (docker_unreachable, docker_tls_error) */
    /* A provider configuration's (e2b, cube): its provider's list of sandboxes, as
     * configs_provider_list answers it; NULL when not asked. */
    const json_t *remote;
    /* The engine asked, valid during the callback only. */
    const char *host, *tls_dir;
    long timeout_ms;
};
/* The engine of docker configuration id: its docker.host (else SBX_DOCKER_HOST), its
 * docker.tls_cert_path for a tcp host (else NULL), its http_timeout_sec in ms (0: none
 * set). 404 sandbox_config_not_found, 400 invalid_request when it is not docker's. */
int configs_docker_engine(struct configs *c, const char *id, char **host, char **tls_dir,
                          long *timeout_ms, struct sbx_err *err);

typedef void (*configs_engine_fn)(void *data, const struct configs_engine_answer *a);
/* Ask the engine of configuration id (its docker.host, else SBX_DOCKER_HOST) for its
 * containers, on a worker thread of jobs: an engine may take up to its timeout to answer,
 * which must not hold the daemon's loop. cb runs once, on the loop, and the answer is
 * freed after it; at once, with asked false, when id is no docker configuration (or
 * cannot be read: the inventory then says so). True when cb is still to come (the
 * caller suspends its request), false when it has run. */
bool configs_engine_ask(struct configs *c, struct jobs *jobs, const char *id,
                        configs_engine_fn cb, void *data);

/* The live sandboxes made from a configuration (all users), as the inventory shows
 * them; *verified false when a live row has no sandbox this daemon holds. A docker
 * configuration's are checked against the engine's answer a (configs_engine_ask): each
 * row gets "engine" ({container, state} or null), *engine (NULL: not wanted) {reachable,
 * error?, unclaimed: [containers with no live row]}; a running sandbox without its
 * container, an unclaimed container or an engine that does not answer leave the
 * inventory unverified. A provider configuration's (e2b, cube) against a->remote, the
 * provider's list of its sandboxes {reachable, list, error} (configs_provider_list): each
 * row gets "provider" {sandbox_id, template_id, state} or null, and *engine (as the
 * "provider" part of the answer) {reachable, error?, unclaimed}: the provider's sandboxes
 * labelled with this configuration that no live row claims; a row the provider does not
 * list, an unclaimed one or a provider that did not answer leave it unverified. */
json_t *configs_inventory(struct configs *c, const char *id, const struct configs_engine_answer *a,
                          bool *verified, json_t **engine, struct sbx_err *err);

/* Live or paused sandboxes stop a change of what they run, and a delete:
 * sandboxes_still_live (409); an inventory that cannot be verified too
 * (sandbox_inventory_unverifiable), unless force. */
int configs_check_inventory(struct configs *c, const char *id, const struct configs_engine_answer *a,
                            bool force, struct sbx_err *err);

/* The document a request names: config checked as a PUT would check it (masked values
 * restored from id's stored one), or id's stored document when config is NULL (then id
 * must be given). Errors: sandbox_config_not_found, invalid_sandbox_config. */
int configs_doc_of(struct configs *c, json_t *config, const char *id, json_t **out,
                   struct sbx_err *err);

/* Hold a configuration for a request (owner: its request id). */
int configs_lock(struct configs *c, const char *id, const char *owner, struct sbx_err *err);
void configs_unlock(struct configs *c, const char *id, const char *owner);

/* Fill p from a configuration's document (id: the configuration's, or NULL for one that
 * is not stored, e.g. a probe's), refusing what would widen it
 * (sandbox_config_widened, 400); what p then points to lives in *hold. */
int configs_apply(struct configs *c, const struct auth_identity *who, const char *id,
                  const json_t *doc, struct sandbox_params *p, json_t **hold, struct sbx_err *err);

/* The document's backend is one this daemon runs (invalid_sandbox_config, 400). */
int configs_check_backend(struct configs *c, const json_t *doc, struct sbx_err *err);

/* The context a skill install's env value is sealed under (skills/installs.c). */
char *configs_skill_env_context(const char *install_id, const char *name);

/* The env a user's sandbox from this configuration gets: the configuration's values,
 * then the workspace's skill values (those set on its skill installs last), the user's
 * own sandbox values, the user's skill values (each overriding the one before). A new
 * object of clear values. */
int configs_env_for(struct configs *c, const char *user, const char *config_id, const json_t *doc,
                    json_t **out, struct sbx_err *err);

#endif
