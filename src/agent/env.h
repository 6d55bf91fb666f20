/* A command environment: a NULL-terminated vector of "K=V" strings, at most
 * ENV_MAX_BYTES in all, where a later K replaces an earlier one. Exec streams,
 * shell sessions and background processes all build their commands' environment
 * with it; sessions also keep theirs in one between commands. */
#ifndef SBX_AGENT_ENV_H
#define SBX_AGENT_ENV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* Bounds what a session can accumulate (its exports are saved after every command). */
#define ENV_MAX_BYTES (1024u * 1024u)
#define ENV_MAX_VARS 4096

#define ENV_BASE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ENV_BASE_HOME "HOME=/tmp"

struct envv {
    char **v; /* v[n] == NULL */
    size_t n, cap, bytes;
};

/* PATH, HOME=/tmp, LANG=C.UTF-8, TERM=dumb, plus what env_base_add added: all a command
 * gets from the agent. */
void envv_init_base(struct envv *e);
/* Add "K=V" (a static string) to every later base environment: the proxy variables,
 * once the egress listener is up. At most ENV_BASE_EXTRA_MAX. */
#define ENV_BASE_EXTRA_MAX 8
void env_base_add(const char *kv);
/* What a command switched to the unprivileged user gets instead of HOME=/tmp, and
 * besides (spawn.c); part of the base environment for envv_is_base. */
extern const char env_user_home[], env_user_user[], env_user_logname[];
#define ENV_USER_XDG_N 2
extern const char *const env_user_xdg[ENV_USER_XDG_N];
/* Is "K=V" exactly an entry of the base environment? */
bool envv_is_base(const char *kv);
void envv_init_empty(struct envv *e);
void envv_copy(struct envv *dst, const struct envv *src);
void envv_free(struct envv *e);
/* Set "K=V" (len bytes, K non-empty, no NUL). -EINVAL for a malformed entry, -E2BIG
 * past the bounds; e is unchanged then. */
int envv_set(struct envv *e, const char *kv, size_t len);
void envv_unset(struct envv *e, const char *key, size_t klen);
/* The "K=V" entry for key, or NULL. */
const char *envv_find(const struct envv *e, const char *key, size_t klen);
/* Apply a request's optional "field": ["K=V", ...] (bad_request on anything else). */
int envv_set_json(struct envv *e, json_t *list, const char *field, struct sbx_err *err);

#endif
