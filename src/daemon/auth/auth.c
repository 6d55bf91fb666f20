#include "auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"

#define KEY_ID_HEX 16
#define KEY_SECRET_HEX 64

void auth_key_hash(const char *key, char hash[AUTH_HASH_HEX_LEN + 1])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, strlen(key), md);
    sbx_hex(md, sizeof(md), hash);
}

int auth_key_generate(char key[AUTH_KEY_LEN + 1], char key_id[AUTH_KEY_ID_LEN + 1],
                      char hash[AUTH_HASH_HEX_LEN + 1], struct sbx_err *err)
{
    unsigned char idr[KEY_ID_HEX / 2], sec[KEY_SECRET_HEX / 2];
    char idh[KEY_ID_HEX + 1], sech[KEY_SECRET_HEX + 1];
    if (RAND_bytes(idr, sizeof(idr)) != 1 || RAND_bytes(sec, sizeof(sec)) != 1)
        return sbx_err_set(err, EIO, "internal", "no randomness for a new key");
    sbx_hex(idr, sizeof(idr), idh);
    sbx_hex(sec, sizeof(sec), sech);
    snprintf(key, AUTH_KEY_LEN + 1, "sbx_%s_%s", idh, sech);
    snprintf(key_id, AUTH_KEY_ID_LEN + 1, "key_%s", idh);
    auth_key_hash(key, hash);
    OPENSSL_cleanse(sec, sizeof(sec));
    OPENSSL_cleanse(sech, sizeof(sech));
    return 0;
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int auth_key_parse(const char *key, char key_id[AUTH_KEY_ID_LEN + 1], struct sbx_err *err)
{
    size_t n = strlen(key);
    bool ok = n >= AUTH_KEY_MIN && n <= AUTH_KEY_MAX && !strncmp(key, "sbx_", 4);
    for (size_t i = 4; ok && i < n; i++) {
        char c = key[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-';
    }
    if (!ok)
        return sbx_err_set(err, EACCES, "invalid_api_key", "the API key is not valid");
    if (n == 4 + KEY_ID_HEX + 1 + KEY_SECRET_HEX && key[4 + KEY_ID_HEX] == '_' &&
        all_hex(key + 4, KEY_ID_HEX)) {
        snprintf(key_id, AUTH_KEY_ID_LEN + 1, "key_%.*s", KEY_ID_HEX, key + 4);
        return 0;
    }
    /* An operator-chosen key (SBX_ADMIN_KEY) has no id inside: derive one from its hash. */
    char hash[AUTH_HASH_HEX_LEN + 1];
    auth_key_hash(key, hash);
    snprintf(key_id, AUTH_KEY_ID_LEN + 1, "key_%.*s", KEY_ID_HEX, hash);
    return 0;
}

bool auth_hash_equal(const char *a, const char *b)
{
    if (strlen(a) != AUTH_HASH_HEX_LEN || strlen(b) != AUTH_HASH_HEX_LEN)
        return false;
    return CRYPTO_memcmp(a, b, AUTH_HASH_HEX_LEN) == 0;
}

bool auth_user_valid(const char *user)
{
    size_t n = strlen(user);
    if (n == 0 || n > AUTH_USER_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = user[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '@' || c == '-'))
            return false;
    }
    return true;
}

static const char *const role_names[] = {
    [AUTH_ROLE_VIEWER] = "viewer", [AUTH_ROLE_MEMBER] = "member", [AUTH_ROLE_ADMIN] = "admin"};
static const char *const scope_names[] = {[AUTH_SCOPE_FULL] = "full_access",
                                          [AUTH_SCOPE_RESTRICTED] = "restricted"};
static const char *const level_names[] = {
    [AUTH_TOOL_NONE] = "none", [AUTH_TOOL_BASIC] = "basic", [AUTH_TOOL_SANDBOX] = "sandbox"};

const char *auth_role_name(enum auth_role r)
{
    return role_names[r];
}

int auth_role_parse(const char *s, enum auth_role *out)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(role_names); i++)
        if (!strcmp(s, role_names[i])) {
            *out = (enum auth_role)i;
            return 0;
        }
    return -EINVAL;
}

const char *auth_scope_name(enum auth_scope s)
{
    return scope_names[s];
}

int auth_scope_parse(const char *s, enum auth_scope *out)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(scope_names); i++)
        if (!strcmp(s, scope_names[i])) {
            *out = (enum auth_scope)i;
            return 0;
        }
    return -EINVAL;
}

const char *auth_tool_level_name(enum auth_tool_level t)
{
    return level_names[t];
}

int auth_tool_level_parse(const char *s, enum auth_tool_level *out)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(level_names); i++)
        if (!strcmp(s, level_names[i])) {
            *out = (enum auth_tool_level)i;
            return 0;
        }
    return -EINVAL;
}
