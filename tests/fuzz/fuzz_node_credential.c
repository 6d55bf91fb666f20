/* libFuzzer target for the node-to-node credential (src/daemon/cluster/credential.c), the
 * only thing that lets one node act for a user on another.
 *
 * Input: key id, user, method, path, request id and node separated by NUL bytes, then 8
 * bytes of time and one byte choosing role, tool level, scope and placed. Invariants: a
 * credential signed for a valid identity verifies and gives that identity back; the
 * fields' bytes taken as header values (garbage) never verify; changing the path, the
 * node or one byte of the signature voids a good credential; nothing reads out of bounds.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/cluster/credential.h"
#include "fuzz.h"

#define NFIELDS 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    long long t;
    memcpy(&t, data + size - 9, 8);
    uint8_t bits = data[size - 1];
    size_t n = size - 9;
    char *buf = calloc(1, n + NFIELDS + 1);
    memcpy(buf, data, n);
    const char *f[NFIELDS];
    const char *p = buf;
    for (int i = 0; i < NFIELDS; i++) {
        f[i] = p;
        p += strlen(p) + (p < buf + n ? 1 : 0);
        if (p > buf + n)
            p = buf + n;
    }
    struct signurl_key key;
    memset(key.k, 0x5a, sizeof(key.k));
    struct auth_identity who = {.authenticated = true,
                                .role = (enum auth_role)(bits % 3),
                                .tool_level = (enum auth_tool_level)((bits >> 2) % 3),
                                .scope = (enum auth_scope)((bits >> 4) % 2)};
    snprintf(who.key_id, sizeof(who.key_id), "%s", f[0]);
    snprintf(who.user, sizeof(who.user), "%s", f[1]);
    struct cluster_cred c = {.node = f[5], .method = f[2], .path = f[3], .request_id = f[4],
                             .time_ms = t, .placed = bits >> 7};
    char identity[CLUSTER_IDENTITY_MAX + 1], auth[CLUSTER_AUTH_MAX + 1];
    cluster_cred_sign(&key, &c, &who, identity, auth);

    struct auth_identity got;
    struct sbx_err err = {0};
    struct cluster_cred v = {.node = f[5], .method = f[2], .path = f[3], .request_id = f[4]};
    bool key_id_ok = who.key_id[0] && !strpbrk(who.key_id, " \t\n\v\f\r");
    bool valid = key_id_ok && auth_user_valid(who.user) && f[5][0] && t > -(1LL << 60) &&
                 t < (1LL << 60);
    int r = cluster_cred_verify(&key, &v, identity, auth, t, &got, &err);
    if (valid) {
        REQUIRE(r == 0);
        REQUIRE(!strcmp(got.user, who.user) && !strcmp(got.key_id, who.key_id));
        REQUIRE(got.role == who.role && got.tool_level == who.tool_level &&
                got.scope == who.scope && v.placed == c.placed);
        /* Another path, or one signature byte changed, is refused. */
        struct cluster_cred w = v;
        w.path = "/v1/keys";
        if (strcmp(f[3], w.path))
            REQUIRE(cluster_cred_verify(&key, &w, identity, auth, t, &got, &err) < 0);
        size_t al = strlen(auth);
        auth[al - 1] = auth[al - 1] == '0' ? '1' : '0';
        REQUIRE(cluster_cred_verify(&key, &v, identity, auth, t, &got, &err) < 0);
    }
    /* The raw fields as header values: never a credential. */
    REQUIRE(cluster_cred_verify(&key, &v, f[0], f[1], t, &got, &err) < 0 ||
            !strcmp(f[1], auth));
    free(buf);
    return 0;
}
