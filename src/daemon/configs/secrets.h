/* Secrets kept in the store (configuration env_vars, injected headers, personal
 * variables): AES-256-GCM under a key kept apart from the store, in <data>/secrets.key
 * (0600), so a copy of sbx.db alone reveals none of them. A sealed value reads
 * "sbxenc:v1:" + base64(nonce | tag | ciphertext); the associated data binds it to what
 * it is the value of, so a sealed value moved to another field does not open. */
#ifndef SBX_CONFIGS_SECRETS_H
#define SBX_CONFIGS_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

#define SECRETS_KEY_FILE "secrets.key"
#define SECRETS_VALUE_MAX (32 * 1024)
/* What a secret reads as in every answer; sent back on a PUT it keeps the stored value. */
#define SECRETS_MASK "********"

struct secrets;

/* Load <data_dir>/secrets.key, creating it (0600, random) on first start. */
int secrets_open(const char *data_dir, struct secrets **out, struct sbx_err *err);
void secrets_free(struct secrets *s);
/* A malloc'd sealed value of plain, bound to context. */
int secrets_seal(const struct secrets *s, const char *context, const char *plain, char **out,
                 struct sbx_err *err);
/* The malloc'd plain text of a sealed value; secret_unreadable when it does not open. */
int secrets_open_value(const struct secrets *s, const char *context, const char *sealed, char **out,
                       struct sbx_err *err);
bool secrets_is_sealed(const char *v);
/* Overwrite and free a plain text. */
void secrets_drop(char *plain);

#endif
