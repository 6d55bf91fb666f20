/* The durable state of sbxd: SQLite in WAL mode under the data dir, or PostgreSQL
 * (SBX_STORE=postgres://…, docs/scale-out.md). Every state change is written here
 * before it is acted on, so a restart loses nothing. */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"
#include "../auth/auth.h"

#define STORE_ID_MAX 40
#define STORE_NAME_MAX 64
#define STORE_DIGEST_MAX 80
/* A node's id (docs/scale-out.md): [A-Za-z0-9_.-], at most this long. */
#define STORE_NODE_ID_MAX 63
/* The node of a store no node has claimed (unit tests, tools). */
#define STORE_NODE_LOCAL "local"

struct store;

int store_open(const char *path, struct store **out, struct sbx_err *err);
/* url NULL or "": SQLite at path. A postgres:// URL: the store is there (schema migrated
 * at open), and path holds what is not yet on PostgreSQL (docs/scale-out.md). */
int store_open_at(const char *url, const char *path, struct store **out, struct sbx_err *err);
bool store_is_postgres(const struct store *s);
/* Run as node_id on this store: its lock is held for the store's lifetime (-EBUSY,
 * node_in_use, while another process holds it), new sandboxes' rows carry it, and rows
 * written before nodes existed become its own. */
int store_claim_node(struct store *s, const char *node_id, struct sbx_err *err);
/* The node this store was claimed as (STORE_NODE_LOCAL until then). */
const char *store_node(const struct store *s);
/* What and where the store is, for the log (never a password). */
void store_describe(struct store *s, char *buf, size_t cap);
/* An online copy of the store at dest (a new file), taken with SQLite's backup API while
 * sbxd may go on writing; a PostgreSQL store is refused (pg_dump). */
int store_backup(struct store *s, const char *dest, struct sbx_err *err);
void store_free(struct store *s);

struct store_key {
    char id[AUTH_KEY_ID_LEN + 1];
    char user[AUTH_USER_MAX + 1];
    enum auth_role role;
    enum auth_tool_level tool_level;
    enum auth_scope scope;
    char hash[AUTH_HASH_HEX_LEN + 1];
    long long created_at;
};

int store_key_insert(struct store *s, const struct store_key *k, struct sbx_err *err);
/* -ENOENT (key_not_found) for unknown or deleted keys. */
int store_key_get(struct store *s, const char *id, struct store_key *out, struct sbx_err *err);
int store_key_delete(struct store *s, const char *id, struct sbx_err *err);
/* Sets k->id's role, tool level and scope; -ENOENT (key_not_found) as store_key_get. */
int store_key_update(struct store *s, const struct store_key *k, struct sbx_err *err);
typedef void (*store_key_cb)(const struct store_key *k, void *data);
int store_key_each(struct store *s, store_key_cb cb, void *data, struct sbx_err *err);
int store_key_count(struct store *s, long long *out, struct sbx_err *err);

/* Sandbox states as stored. "creating", "running" and "paused" count as live; only
 * "creating" and "running" against the running limits. */
#define SANDBOX_CREATING "creating"
#define SANDBOX_RUNNING "running"
#define SANDBOX_PAUSED "paused"
#define SANDBOX_DESTROYED "destroyed"
#define SANDBOX_FAILED "failed"

struct store_sandbox {
    char id[STORE_ID_MAX + 1];
    char user[AUTH_USER_MAX + 1];
    char key_id[AUTH_KEY_ID_LEN + 1];
    char status[16];
    char backend[8];
    char runtime[16];
    char template_name[STORE_NAME_MAX + 1];
    char template_digest[STORE_DIGEST_MAX + 1];
    char *env_json; /* owned; "{}" when empty */
    long long ttl_seconds;
    long long created_at;
    long long expires_at;
    long long ended_at;
    char end_reason[32];
    long long memory_mb, pids, cpu_millicores;
    bool enable_default_session; /* commands without a session_id share the "default" one */
    char node_id[STORE_NODE_ID_MAX + 1]; /* the node it runs on; "" on insert: this one */
};

void store_sandbox_clear(struct store_sandbox *sb);
int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct sbx_err *err);
/* Insert sb (or, with assign, hand a pooled row to sb's owner as store_sandbox_assign
 * does) only while its user and key run fewer than lim allows, counted across every
 * node under the store's write lock: -EAGAIN (sandbox_concurrency_limit) otherwise. */
struct store_sandbox_limits {
    long long per_user, per_key;
};
int store_sandbox_claim(struct store *s, const struct store_sandbox *sb, bool assign,
                        const struct store_sandbox_limits *lim, struct sbx_err *err);
int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *out,
                      struct sbx_err *err);
/* Mark a sandbox ended (destroyed or failed) with a reason, or set it running. */
int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason, long long now, struct sbx_err *err);
/* Its machine died but it is kept (its workspace stays, a restart brings it back):
 * status failed with reason, and still listed by store_sandbox_each_live. */
int store_sandbox_set_failed(struct store *s, const char *id, const char *reason,
                             struct sbx_err *err);
/* A new expiry (unix seconds) for a live sandbox (E2B's setTimeout). */
int store_sandbox_set_expiry(struct store *s, const char *id, long long expires_at,
                             struct sbx_err *err);
/* Hand a warm-pool sandbox to its user: owner, env, TTL and session flag from sb. */
int store_sandbox_assign(struct store *s, const struct store_sandbox *sb, struct sbx_err *err);
typedef void (*store_sandbox_cb)(const struct store_sandbox *sb, void *data);
/* Hand a paused sandbox of node from to node to, under the write lock: -EBUSY
 * (sandbox_moved) unless it is still paused on from. */
int store_sandbox_move(struct store *s, const char *id, const char *from, const char *to,
                       struct sbx_err *err);
/* Live sandboxes (paused and kept failed ones too), all users when user is NULL, on
 * every node when node is NULL. */
int store_sandbox_each_live(struct store *s, const char *user, const char *node,
                            store_sandbox_cb cb, void *data, struct sbx_err *err);
int store_sandbox_count_live(struct store *s, const char *user, const char *key_id,
                             long long *per_user, long long *per_key, struct sbx_err *err);

/* --- sandbox meta (sandbox_meta.c): name -> value facts beside a sandbox's row ----- */

#define STORE_META_BOOT_ID "boot_id"           /* the agent's boot id, from its HELLO */
#define STORE_META_PARENT "parent_id"          /* a fork's parent */
#define STORE_META_PAUSED_AT "paused_at"       /* unix seconds, while paused */
#define STORE_META_FALLBACK "backend_fallback" /* why v1 was used when backend was omitted */
/* A configuration's settings its sandbox keeps (docs/configs.md). */
#define STORE_META_TERMINAL_IDLE "terminal_idle_sec" /* its terminals' idle limit, seconds */
#define STORE_META_COMMAND_TIMEOUT "command_timeout_sec" /* its commands' default timeout */
#define STORE_META_DESKTOP_OFF "desktop_disabled"    /* "1": no preview of the desktop port */
#define STORE_META_DOCKER "docker" /* its configuration's docker object (JSON), docker only */

int store_meta_set(struct store *s, const char *sandbox_id, const char *name, const char *value,
                   struct sbx_err *err);
/* -ENOENT (err untouched) when the sandbox has no such fact; out is then "". */
int store_meta_get(struct store *s, const char *sandbox_id, const char *name, char *out,
                   size_t cap, struct sbx_err *err);
/* cb for every running sandbox (of any node) that has the fact name, with its value: one
 * query, where a store_meta_get a sandbox would be one round trip each. */
typedef void (*store_meta_cb)(const char *sandbox_id, const char *value, void *data);
int store_meta_each_running(struct store *s, const char *name, store_meta_cb cb, void *data,
                            struct sbx_err *err);

struct store_sandbox_counts {
    long long user_running; /* creating or running, all the user's keys */
    long long user_paused;
    long long key_active;   /* creating, running or paused, this key */
};
int store_sandbox_counts(struct store *s, const char *user, const char *key_id,
                         struct store_sandbox_counts *out, struct sbx_err *err);

/* --- exec records (execs.c) ----------------------------------------------------- */

#define EXEC_RUNNING "running"
#define EXEC_EXITED "exited"
#define EXEC_TIMED_OUT "timed_out"
#define EXEC_INTERRUPTED "interrupted"
#define EXEC_FAILED "failed"

struct store_exec {
    char id[STORE_ID_MAX + 1];
    char sandbox_id[STORE_ID_MAX + 1];
    char status[16];
    long long started_at_ms, ended_at_ms;
    char *result_json; /* owned; NULL while running */
};

int store_exec_insert(struct store *s, const char *id, const char *sandbox_id, const char *user,
                      long long started_at_ms, struct sbx_err *err);
int store_exec_finish(struct store *s, const char *id, const char *status, const char *result_json,
                      long long ended_at_ms, struct sbx_err *err);
/* exec_not_found unless the exec belongs to that sandbox and user. */
int store_exec_get(struct store *s, const char *sandbox_id, const char *id, const char *user,
                   struct store_exec *out, struct sbx_err *err);
/* After a restart nothing is running: what was, reads "interrupted". */
int store_exec_interrupt_running(struct store *s, long long now_ms, struct sbx_err *err);
/* What a retention pass removes: rows older than before_ms (0: none by age) and the
 * oldest past the newest keep (0: no cap), at most batch of them. */
struct store_prune {
    long long before_ms;
    long long keep;
    int batch;
};
/* Retention: forget finished execs, by when they ended and by count. */
int store_exec_prune(struct store *s, const struct store_prune *p, long long *removed,
                     struct sbx_err *err);
void store_exec_clear(struct store_exec *e);

/* The workspace's generation counter and the fingerprint it was last moved at. */
int store_ws_get(struct store *s, const char *sandbox_id, long long *generation,
                 char fingerprint[65], struct sbx_err *err);
int store_ws_set(struct store *s, const char *sandbox_id, long long generation,
                 const char *fingerprint, struct sbx_err *err);

/* --- idempotency keys (idempotency.c) ---------------------------------------------- */

#define STORE_IDEM_KEY_MAX 255
#define STORE_IDEM_TTL_S 86400

enum store_idem_state {
    STORE_IDEM_NEW,         /* recorded as in progress: go ahead */
    STORE_IDEM_REPLAY,      /* finished before: status and response are filled */
    STORE_IDEM_IN_PROGRESS, /* the first request with this key is still running */
    STORE_IDEM_MISMATCH,    /* the key was used with another request */
};

struct store_idem {
    enum store_idem_state state;
    int status;
    char *response; /* owned, for REPLAY */
};

/* Claim (user, key) for a request whose method, path and body hash to request_hash. */
int store_idem_begin(struct store *s, const char *user, const char *key, const char *request_hash,
                     long long now_s, struct store_idem *out, struct sbx_err *err);
int store_idem_finish(struct store *s, const char *user, const char *key, int status,
                      const char *response, struct sbx_err *err);
/* Forget a claim whose request ended without a response worth replaying. */
int store_idem_release(struct store *s, const char *user, const char *key, struct sbx_err *err);
/* At start: claims left in progress by a crash are released (their exec reads
 * "interrupted"), so a retry runs again instead of waiting forever. */
int store_idem_release_in_progress(struct store *s, struct sbx_err *err);
void store_idem_clear(struct store_idem *i);

/* --- the audit log (audit.c) -------------------------------------------------------- */

struct store_audit_entry {
    long long seq;
    long long ts_ms;
    const char *user;
    const char *key_id;
    const char *action;
    const char *sandbox_id; /* may be NULL */
    const char *outcome;
    const char *request_id; /* may be NULL */
    const char *details;    /* JSON object text, may be NULL */
    char prev_hash[65];
    char hash[65];
};

struct store_audit_filter {
    const char *user;       /* NULL: any */
    const char *sandbox_id; /* NULL: any */
    const char *action;     /* NULL: any */
    long long since_ms, until_ms; /* 0: open */
    long long after_seq;    /* pagination cursor */
    int limit;
};

/* Append one entry, chained to the previous one by hash. */
int store_audit_append(struct store *s, const struct store_audit_entry *e, struct sbx_err *err);
typedef void (*store_audit_cb)(const struct store_audit_entry *e, void *data);
int store_audit_query(struct store *s, const struct store_audit_filter *f, store_audit_cb cb,
                      void *data, struct sbx_err *err);
/* The signing key of prune anchors (a secret in the data dir, see audit/retention.h). */
struct store_anchor_key {
    unsigned char k[32];
};
/* Where the kept chain starts: the last pruned entry. !present: nothing was pruned. */
struct store_audit_anchor {
    bool present;
    long long seq;
    char hash[65];
    long long pruned_at_ms;
    char signature[65];
};
struct store_audit_verdict {
    bool ok;
    long long checked;
    long long bad_seq; /* first entry that does not verify, when !ok */
    char reason[128];
    struct store_audit_anchor anchor;
};
/* From the anchor (its signature checked with key) to the head. */
int store_audit_verify(struct store *s, const struct store_anchor_key *key,
                       struct store_audit_verdict *out, struct sbx_err *err);
/* Remove the oldest entries p selects (only while the chain verifies) and move the
 * signed anchor to the last one removed. */
int store_audit_prune(struct store *s, const struct store_prune *p, long long now_ms,
                      const struct store_anchor_key *key, long long *removed, struct sbx_err *err);
/* The chain's hash function, exposed for unit tests. */
void store_audit_hash(const struct store_audit_entry *e, char out[65]);

/* --- egress (egress.c) ---------------------------------------------------------------- */

/* Connections kept per sandbox; older rows are dropped as new ones come. */
#define STORE_EGRESS_LOG_KEEP 10000

struct store_egress_conn {
    long long id;
    const char *sandbox_id;
    const char *method; /* CONNECT, or the plain-HTTP method */
    const char *host;
    const char *address; /* the address dialled or refused; NULL/"" when none */
    unsigned port;
    long long bytes_up, bytes_down; /* sandbox -> upstream, upstream -> sandbox */
    long long started_at_ms, ended_at_ms; /* ended 0: still open */
    const char *verdict; /* "allowed" | "denied" | "error" */
    const char *reason;
};

/* policy_json: the sandbox's policy as egress_policy_to_json writes it. */
int store_egress_policy_set(struct store *s, const char *sandbox_id, const char *policy_json,
                            long long now, struct sbx_err *err);
/* *out NULL when the sandbox has no row (policy none). */
int store_egress_policy_get(struct store *s, const char *sandbox_id, char **out,
                            struct sbx_err *err);
/* A fork inherits its parent's policy. */
int store_egress_policy_copy(struct store *s, const char *from_id, const char *to_id,
                             long long now, struct sbx_err *err);
int store_egress_log_insert(struct store *s, const struct store_egress_conn *c, long long *id,
                            struct sbx_err *err);
int store_egress_log_finish(struct store *s, long long id, long long bytes_up, long long bytes_down,
                            long long ended_at_ms, const char *verdict, const char *reason,
                            struct sbx_err *err);
/* At start: connections left open by a previous daemon end, "interrupted". */
int store_egress_log_interrupt(struct store *s, long long now_ms, struct sbx_err *err);
/* Retention: forget ended connections that started before before_ms, at most batch. */
int store_egress_log_prune(struct store *s, long long before_ms, int batch, long long *removed,
                           struct sbx_err *err);
typedef void (*store_egress_cb)(const struct store_egress_conn *c, void *data);
/* Newest first; before_id 0: from the newest. */
int store_egress_log_query(struct store *s, const char *sandbox_id, long long before_id,
                           int limit, store_egress_cb cb, void *data, struct sbx_err *err);

/* --- the skill catalog (skills/) --- */
#define STORE_SKILL_ID_MAX 72
struct store_skill {
    char id[STORE_SKILL_ID_MAX + 1];
    char name[65];
    char version[33];
    char bundle_sha256[65];
    char source[160];   /* "builtin", "upload" or "@owner/slug" */
    char owner[AUTH_USER_MAX + 1];
    char *description; /* owned */
    char *envs_json;   /* owned: [{name, description, required}] */
    long long created_at;
};
void store_skill_clear(struct store_skill *k);
int store_skill_insert(struct store *s, const struct store_skill *k, struct sbx_err *err);
/* skill_not_found. */
int store_skill_get(struct store *s, const char *id, struct store_skill *out,
                    struct sbx_err *err);
/* 0 and *id "" when none has that name and version. */
int store_skill_find(struct store *s, const char *name, const char *version,
                     char id[STORE_SKILL_ID_MAX + 1], struct sbx_err *err);
typedef void (*store_skill_cb)(const struct store_skill *k, void *data);
/* Oldest first. */
int store_skill_each(struct store *s, store_skill_cb cb, void *data, struct sbx_err *err);
int store_skill_delete(struct store *s, const char *id, struct sbx_err *err);
/* Skills installed into sandbox configurations (skill_installs.c, docs/skills.md). */
#define STORE_SKILL_STATUS_MAX 15
struct store_skill_install {
    char id[STORE_ID_MAX + 1];
    char config_id[STORE_ID_MAX + 1];
    char catalog_id[STORE_SKILL_ID_MAX + 1]; /* the bundle of the current (or last) round */
    char name[65];
    char version[33];
    char bundle_sha256[65];
    bool enabled;
    char status[STORE_SKILL_STATUS_MAX + 1]; /* installing, ready, failed */
    char *error;                              /* owned, or NULL */
    char snapshot_id[STORE_ID_MAX + 1];       /* the last install that worked, or "" */
    char served_catalog_id[STORE_SKILL_ID_MAX + 1]; /* what sandboxes get, or "" */
    char served_version[33];
    char session_id[STORE_ID_MAX + 1]; /* the current round's install sandbox */
    char message_id[STORE_ID_MAX + 1]; /* the current round, for guidance */
    char *envs_json;                   /* owned: {name: sealed value} */
    char owner[AUTH_USER_MAX + 1];
    long long created_at, updated_at;
};
void store_skill_install_clear(struct store_skill_install *i);
/* Insert or replace by id; skill_installed (409) when the configuration has the name. */
int store_skill_install_put(struct store *s, const struct store_skill_install *i,
                            struct sbx_err *err);
/* config_id NULL: any; skill_install_not_found (404). */
int store_skill_install_get(struct store *s, const char *config_id, const char *id,
                            struct store_skill_install *out, struct sbx_err *err);
typedef void (*store_skill_install_cb)(const struct store_skill_install *i, void *data);
/* config_id, catalog_id NULL: any (catalog_id matches the current or the served bundle). */
int store_skill_install_each(struct store *s, const char *config_id, const char *catalog_id,
                             store_skill_install_cb cb, void *data, struct sbx_err *err);
int store_skill_install_delete(struct store *s, const char *id, struct sbx_err *err);
/* At start: rounds a previous daemon left running failed. */
int store_skill_install_interrupt(struct store *s, long long now, struct sbx_err *err);
/* The workspace snapshot a configuration's sandboxes start from ("" / NULL: none). */
int store_skill_config_snapshot_set(struct store *s, const char *config_id,
                                    const char *snapshot_id, struct sbx_err *err);
int store_skill_config_snapshot_get(struct store *s, const char *config_id,
                                    char out[STORE_ID_MAX + 1], struct sbx_err *err);
/* A deleted configuration's installs and snapshot (store_config_delete); the snapshots'
 * files go at the next start. */
int store_skill_installs_forget(struct store *s, const char *config_id, struct sbx_err *err);
/* Every install of the configuration that names a snapshot now names this one (which
 * holds them all). */
int store_skill_installs_repoint(struct store *s, const char *config_id, const char *snapshot_id,
                                 struct sbx_err *err);
/* Whether any configuration or install still names the snapshot. */
int store_skill_snapshot_used(struct store *s, const char *snapshot_id, bool *used,
                              struct sbx_err *err);
/* --- sandbox configurations (config_records.c, docs/configs.md) ---------------------- */

struct store_config {
    char id[STORE_ID_MAX + 1];
    char *name, *description; /* owned */
    char *config_json;        /* owned; secrets in it are encrypted (configs/secrets.c) */
    long long created_at, updated_at;
};

void store_config_clear(struct store_config *c);
/* sandbox_config_exists (409) when the name is taken. */
int store_config_insert(struct store *s, const struct store_config *c, struct sbx_err *err);
int store_config_update(struct store *s, const struct store_config *c, struct sbx_err *err);
/* sandbox_config_not_found (404). */
int store_config_get(struct store *s, const char *id, struct store_config *out,
                     struct sbx_err *err);
typedef void (*store_config_cb)(const struct store_config *c, void *data);
int store_config_each(struct store *s, store_config_cb cb, void *data, struct sbx_err *err);
/* Also forgets the personal variables set for it and the skills installed into it. */
int store_config_delete(struct store *s, const char *id, struct sbx_err *err);
/* A lease on a configuration while a request changes or relies on it, held in the store
 * so that every node sharing it sees it: sandbox_config_locked (423) while another
 * owner's lease runs. */
int store_config_lock(struct store *s, const char *id, const char *owner, long long now_ms,
                      long long until_ms, struct sbx_err *err);
int store_config_unlock(struct store *s, const char *id, const char *owner, struct sbx_err *err);

/* Which configuration a sandbox was made from, the network policy and the (sealed)
 * variables it got then. */
int store_sandbox_config_set(struct store *s, const char *sandbox_id, const char *config_id,
                             const char *network_json, const char *sealed_env,
                             struct sbx_err *err);
/* -ENOENT (err untouched) for a sandbox made without one. */
int store_sandbox_config_get(struct store *s, const char *sandbox_id,
                             char config_id[STORE_ID_MAX + 1], char **network_json,
                             char **sealed_env, struct sbx_err *err);
/* A fork is made from what its parent was. */
int store_sandbox_config_copy(struct store *s, const char *from_id, const char *to_id,
                              struct sbx_err *err);
/* Creating, running and paused sandboxes of a configuration (id, user, status only). */
int store_config_live_sandboxes(struct store *s, const char *config_id, store_sandbox_cb cb,
                                void *data, struct sbx_err *err);

#define STORE_SETTING_SCRIPTS_DISABLED "scripts_disabled"
int store_setting_set(struct store *s, const char *name, const char *value, struct sbx_err *err);
/* out "" when unset. */
int store_setting_get(struct store *s, const char *name, char *out, size_t cap,
                      struct sbx_err *err);

/* A personal variable: scope "sandbox" (target: a configuration id) or "skill" (target:
 * a skill id); value encrypted. */
struct store_env_var {
    const char *user, *scope, *target, *name, *value;
    long long updated_at;
};
int store_personal_env_set(struct store *s, const struct store_env_var *v, struct sbx_err *err);
/* env_var_not_found (404) when it was not set. */
int store_personal_env_delete(struct store *s, const struct store_env_var *v, struct sbx_err *err);
typedef void (*store_env_var_cb)(const struct store_env_var *v, void *data);
/* target NULL: every target of the scope. */
int store_personal_env_each(struct store *s, const char *user, const char *scope,
                            const char *target, store_env_var_cb cb, void *data,
                            struct sbx_err *err);

/* A variable a skill declares, with the workspace's value (encrypted, or NULL). */
struct store_skill_env {
    const char *skill_id, *name, *description, *value;
    bool required;
    long long updated_at;
};
int store_skill_env_declare(struct store *s, const struct store_skill_env *d, struct sbx_err *err);
typedef void (*store_skill_env_cb)(const struct store_skill_env *d, void *data);
/* skill_id NULL: every skill's. */
int store_skill_env_each(struct store *s, const char *skill_id, store_skill_env_cb cb, void *data,
                         struct sbx_err *err);

/* --- chat gateway sessions (chat_sessions.c): x-sbx-session-id -> sandbox, per user --- */
int store_chat_session_set(struct store *s, const char *user, const char *session_id,
                           const char *sandbox_id, long long now, struct sbx_err *err);
/* -ENOENT (err untouched) when the user has no such session. */
int store_chat_session_get(struct store *s, const char *user, const char *session_id,
                           char out[STORE_ID_MAX + 1], struct sbx_err *err);

#endif
