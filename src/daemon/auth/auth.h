/* API keys: generation, hashing and verification. A key is
 *   sbx_<key id: 16 hex>_<secret: 64 hex>
 * (operator-chosen keys may have any sbx_ form) and only SHA-256 of the whole key is stored; the key id finds the row and the
 * hash is compared in constant time. */
#ifndef SBX_AUTH_H
#define SBX_AUTH_H

#include <stdbool.h>

#include "../../common/err.h"

#define AUTH_KEY_ID_LEN 20   /* "key_" + 16 hex */
#define AUTH_KEY_LEN 86      /* "sbx_" + 16 + "_" + 64 + slack */
#define AUTH_KEY_MIN 24      /* operator-chosen keys: sbx_ and at least 20 more */
#define AUTH_KEY_MAX 256
#define AUTH_HASH_HEX_LEN 64
#define AUTH_USER_MAX 64

/* Ordered: each role may do what the ones before it may (docs/configs.md). */
enum auth_role { AUTH_ROLE_VIEWER, AUTH_ROLE_MEMBER, AUTH_ROLE_ADMIN };
/* A restricted key cannot read or change configurations, whatever its role. */
enum auth_scope { AUTH_SCOPE_FULL, AUTH_SCOPE_RESTRICTED };
enum auth_tool_level { AUTH_TOOL_NONE, AUTH_TOOL_BASIC, AUTH_TOOL_SANDBOX };

struct auth_identity {
    bool authenticated;
    char key_id[AUTH_KEY_ID_LEN + 1];
    char user[AUTH_USER_MAX + 1];
    enum auth_role role;
    enum auth_tool_level tool_level;
    enum auth_scope scope;
};

/* A fresh random key, its id and its hash. */
int auth_key_generate(char key[AUTH_KEY_LEN + 1], char key_id[AUTH_KEY_ID_LEN + 1],
                      char hash[AUTH_HASH_HEX_LEN + 1], struct sbx_err *err);
/* The id of a presented key: the one inside a generated key, or one derived from the
 * hash of an operator-chosen key (sbx_ and 20-252 of [A-Za-z0-9_-]). Fails with
 * invalid_api_key on anything else. */
int auth_key_parse(const char *key, char key_id[AUTH_KEY_ID_LEN + 1], struct sbx_err *err);
void auth_key_hash(const char *key, char hash[AUTH_HASH_HEX_LEN + 1]);
/* Constant-time comparison of two hex hashes. */
bool auth_hash_equal(const char *a, const char *b);

/* User names: [A-Za-z0-9_.@-]{1,64}. */
bool auth_user_valid(const char *user);

const char *auth_role_name(enum auth_role r);
int auth_role_parse(const char *s, enum auth_role *out);
const char *auth_scope_name(enum auth_scope s);
int auth_scope_parse(const char *s, enum auth_scope *out);
const char *auth_tool_level_name(enum auth_tool_level t);
int auth_tool_level_parse(const char *s, enum auth_tool_level *out);

#endif
