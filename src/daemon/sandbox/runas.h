/* Who a command runs as inside a sandbox (docs/security.md): the unprivileged "user"
 * (uid 1000) unless the request asks for "root" and the operator allows it
 * (SBX_ALLOW_ROOT=1). Every route that starts something in a sandbox (exec, sessions,
 * background processes, terminals, the E2B surface) checks its "user" here. */
#ifndef SBX_RUNAS_H
#define SBX_RUNAS_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

#define RUNAS_USER "user"
#define RUNAS_ROOT "root"

struct sandbox;

/* A request's "user" field: NULL (absent or null), RUNAS_USER or RUNAS_ROOT in *out;
 * anything else is 400 invalid_user. */
int runas_parse(json_t *v, const char **out, struct sbx_err *err);
/* 403 root_not_allowed when user is RUNAS_ROOT and the operator does not allow root. */
int runas_check(const struct sandbox *sb, const char *user, struct sbx_err *err);
/* Both on body["user"], then the agent's op["user"] when the request named one (else the
 * agent's default: the user, or a session's own). */
int runas_apply(const struct sandbox *sb, json_t *body, json_t *op, struct sbx_err *err);
/* op["user"] = user, when user is not NULL. */
void runas_put(json_t *op, const char *user);

#endif
