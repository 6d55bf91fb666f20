/* The durable state of sbxd: SQLite in WAL mode under the data dir. Every state
 * change is written here before it is acted on, so a restart loses nothing. */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../auth/auth.h"

#define STORE_ID_MAX 40
#define STORE_NAME_MAX 64
#define STORE_DIGEST_MAX 80

struct store;

int store_open(const char *path, struct store **out, struct sbx_err *err);
void store_free(struct store *s);

struct store_key {
    char id[AUTH_KEY_ID_LEN + 1];
    char user[AUTH_USER_MAX + 1];
    enum auth_role role;
    enum auth_tool_level tool_level;
    char hash[AUTH_HASH_HEX_LEN + 1];
    long long created_at;
};

int store_key_insert(struct store *s, const struct store_key *k, struct sbx_err *err);
/* -ENOENT (key_not_found) for unknown or deleted keys. */
int store_key_get(struct store *s, const char *id, struct store_key *out, struct sbx_err *err);
int store_key_delete(struct store *s, const char *id, struct sbx_err *err);
typedef void (*store_key_cb)(const struct store_key *k, void *data);
int store_key_each(struct store *s, store_key_cb cb, void *data, struct sbx_err *err);
int store_key_count(struct store *s, long long *out, struct sbx_err *err);

/* Sandbox states as stored. "creating" and "running" count as live. */
#define SANDBOX_CREATING "creating"
#define SANDBOX_RUNNING "running"
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
};

void store_sandbox_clear(struct store_sandbox *sb);
int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct sbx_err *err);
int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *out,
                      struct sbx_err *err);
/* Mark a sandbox ended (destroyed or failed) with a reason, or set it running. */
int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason, long long now, struct sbx_err *err);
typedef void (*store_sandbox_cb)(const struct store_sandbox *sb, void *data);
/* Live sandboxes, all users when user is NULL. */
int store_sandbox_each_live(struct store *s, const char *user, store_sandbox_cb cb, void *data,
                            struct sbx_err *err);
int store_sandbox_count_live(struct store *s, const char *user, const char *key_id,
                             long long *per_user, long long *per_key, struct sbx_err *err);

#endif
