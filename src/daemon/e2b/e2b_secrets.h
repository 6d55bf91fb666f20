/* E2B's /secrets (e2b_secrets.c): a user's named values, sealed at rest, never returned. */
#ifndef SBX_E2B_SECRETS_H
#define SBX_E2B_SECRETS_H

#include "../../common/err.h"

struct sbxd;

/* The clear value of user's secret of that name (or id), malloc'd: the caller drops it
 * with secrets_drop. secret_not_found (404) when the user has none. */
int e2b_secret_value(struct sbxd *d, const char *user, const char *name, char **out,
                     struct sbx_err *err);

#endif
