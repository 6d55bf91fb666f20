#include "credential.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"

/* Fields separated by NUL, which none of them holds, so no two requests sign alike. */
#define CRED_MAC_HEX 64

static void mac(const struct signurl_key *key, const struct cluster_cred *c, const char *identity,
                char out[CRED_MAC_HEX + 1])
{
    char t[24];
    snprintf(t, sizeof(t), "%lld", c->time_ms);
    const char *parts[] = {"sbx-node-v1", c->node, t,          c->placed ? "1" : "0",
                           c->method,     c->path, c->request_id, identity};
    unsigned char buf[4096];
    size_t n = 0;
    bool fits = true;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        size_t len = strlen(parts[i]) + 1;
        if (n + len > sizeof(buf)) {
            fits = false;
            break;
        }
        memcpy(buf + n, parts[i], len);
        n += len;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!fits || !HMAC(EVP_sha256(), key->k, SIGNURL_KEY_LEN, buf, n, md, &mdlen) ||
        mdlen != CRED_MAC_HEX / 2) {
        out[0] = '\0'; /* matches no credential: verification compares 64 hex digits */
        return;
    }
    sbx_hex(md, CRED_MAC_HEX / 2, out);
}

void cluster_cred_sign(const struct signurl_key *key, const struct cluster_cred *c,
                       const struct auth_identity *who, char identity[CLUSTER_IDENTITY_MAX + 1],
                       char auth[CLUSTER_AUTH_MAX + 1])
{
    if (who && who->authenticated)
        snprintf(identity, CLUSTER_IDENTITY_MAX + 1, "%s %s %s %s %s", who->key_id, who->user,
                 auth_role_name(who->role), auth_tool_level_name(who->tool_level),
                 auth_scope_name(who->scope));
    else
        snprintf(identity, CLUSTER_IDENTITY_MAX + 1, "-");
    char m[CRED_MAC_HEX + 1];
    mac(key, c, identity, m);
    snprintf(auth, CLUSTER_AUTH_MAX + 1, "v1 %lld %d %s", c->time_ms, c->placed ? 1 : 0, m);
}

static int bad(struct sbx_err *err, const char *why)
{
    return sbx_err_set(err, EACCES, "invalid_node_credential",
                       "the node-to-node credential %s (every node of a store needs the same "
                       "cluster.key, and clocks within %d s)",
                       why, CLUSTER_CRED_SKEW_MS / 1000);
}

static int parse_identity(const char *s, struct auth_identity *who)
{
    memset(who, 0, sizeof(*who));
    if (!strcmp(s, "-"))
        return 0;
    char key_id[AUTH_KEY_ID_LEN + 2], user[AUTH_USER_MAX + 2], role[16], tool[16], scope[24];
    char extra;
    if (sscanf(s, "%21s %65s %15s %15s %23s %c", key_id, user, role, tool, scope, &extra) != 5 ||
        strlen(key_id) > AUTH_KEY_ID_LEN || !auth_user_valid(user) ||
        auth_role_parse(role, &who->role) < 0 || auth_tool_level_parse(tool, &who->tool_level) < 0 ||
        auth_scope_parse(scope, &who->scope) < 0)
        return -EINVAL;
    snprintf(who->key_id, sizeof(who->key_id), "%.*s", AUTH_KEY_ID_LEN, key_id);
    snprintf(who->user, sizeof(who->user), "%.*s", AUTH_USER_MAX, user);
    who->authenticated = true;
    return 0;
}

int cluster_cred_verify(const struct signurl_key *key, struct cluster_cred *c,
                        const char *identity, const char *auth, long long now_ms,
                        struct auth_identity *who, struct sbx_err *err)
{
    if (!identity || !auth || !c->node || !c->node[0])
        return bad(err, "is incomplete");
    long long t;
    int placed, used = 0;
    char sig[70];
    if (sscanf(auth, "v1 %lld %d %69s%n", &t, &placed, sig, &used) != 3 ||
        auth[used] != '\0' || (placed != 0 && placed != 1) || strlen(sig) != 64)
        return bad(err, "is malformed");
    c->time_ms = t;
    c->placed = placed;
    char want[CRED_MAC_HEX + 1];
    mac(key, c, identity, want);
    if (strlen(want) != CRED_MAC_HEX || CRYPTO_memcmp(want, sig, CRED_MAC_HEX) != 0)
        return bad(err, "does not verify");
    if (llabs(now_ms - t) > CLUSTER_CRED_SKEW_MS)
        return bad(err, "is too old or from the future");
    struct auth_identity id;
    if (parse_identity(identity, &id) < 0)
        return bad(err, "names no valid identity");
    *who = id;
    return 0;
}
