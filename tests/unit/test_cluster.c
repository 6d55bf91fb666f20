/* The node-to-node credential (src/daemon/cluster/credential.c) and the node address
 * check (forward.c): what lets one node act for a user on another. */
#include <errno.h>
#include <string.h>

#include "../../src/daemon/cluster/credential.h"
#include "../../src/daemon/cluster/forward.h"
#include "check.h"

static const long long T = 1765000000000LL;

static struct cluster_cred cred(void)
{
    return (struct cluster_cred){.node = "node-a",
                                 .method = "POST",
                                 .path = "/v1/sandboxes/sb_1/exec",
                                 .request_id = "req_00ff",
                                 .time_ms = T};
}

static int verify(const struct signurl_key *k, struct cluster_cred c, const char *identity,
                  const char *auth, long long now, struct auth_identity *who,
                  struct sbx_err *err)
{
    return cluster_cred_verify(k, &c, identity, auth, now, who, err);
}

static void test_round_trip_and_tampering(void)
{
    struct signurl_key k, other;
    memset(k.k, 1, sizeof(k.k));
    memset(other.k, 2, sizeof(other.k));
    struct auth_identity alice = {.authenticated = true,
                                  .key_id = "key_0123456789abcdef",
                                  .user = "alice@example.com",
                                  .role = AUTH_ROLE_MEMBER,
                                  .tool_level = AUTH_TOOL_SANDBOX,
                                  .scope = AUTH_SCOPE_RESTRICTED};
    struct cluster_cred c = cred();
    c.placed = true;
    char identity[CLUSTER_IDENTITY_MAX + 1], auth[CLUSTER_AUTH_MAX + 1];
    cluster_cred_sign(&k, &c, &alice, identity, auth);
    CHECK(!strcmp(identity, "key_0123456789abcdef alice@example.com member sandbox restricted"),
          "the identity travels in clear: %s", identity);
    CHECK(!strncmp(auth, "v1 1765000000000 1 ", 19) && strlen(auth) == 19 + 64,
          "auth is version, time, placed and 64 hex digits: %s", auth);

    struct auth_identity who;
    struct sbx_err err = {0};
    struct cluster_cred v = cred();
    CHECK(cluster_cred_verify(&k, &v, identity, auth, T + 1000, &who, &err) == 0,
          "it verifies: %.100s", err.msg);
    CHECK(who.authenticated && !strcmp(who.user, alice.user) &&
              !strcmp(who.key_id, alice.key_id) && who.role == AUTH_ROLE_MEMBER &&
              who.tool_level == AUTH_TOOL_SANDBOX && who.scope == AUTH_SCOPE_RESTRICTED &&
              v.placed,
          "and gives the identity and placed back");

    struct cluster_cred bad = cred();
    bad.path = "/v1/sandboxes/sb_2/exec";
    CHECK(verify(&k, bad, identity, auth, T, &who, &err) == -EACCES &&
              !strcmp(err.code, "invalid_node_credential"),
          "another path is refused");
    bad = cred();
    bad.method = "DELETE";
    CHECK(verify(&k, bad, identity, auth, T, &who, &err) == -EACCES, "another method too");
    bad = cred();
    bad.node = "node-b";
    CHECK(verify(&k, bad, identity, auth, T, &who, &err) == -EACCES, "another sender too");
    bad = cred();
    bad.request_id = "req_0100";
    CHECK(verify(&k, bad, identity, auth, T, &who, &err) == -EACCES, "another request id too");
    CHECK(verify(&other, cred(), identity, auth, T, &who, &err) == -EACCES,
          "a node with another key cannot read it");
    CHECK(verify(&k, cred(), "key_0123456789abcdef alice@example.com admin sandbox full_access",
                 auth, T, &who, &err) == -EACCES,
          "a raised role is refused");
    char flipped[CLUSTER_AUTH_MAX + 1];
    snprintf(flipped, sizeof(flipped), "%s", auth);
    flipped[3 + 13 + 1] = '0'; /* placed 1 -> 0 */
    CHECK(verify(&k, cred(), identity, flipped, T, &who, &err) == -EACCES, "placed is signed");
    CHECK(verify(&k, cred(), identity, auth, T + CLUSTER_CRED_SKEW_MS + 1, &who, &err) ==
                  -EACCES &&
              strstr(err.msg, "too old"),
          "a credential older than the skew is refused: %.100s", err.msg);
    CHECK(verify(&k, cred(), identity, auth, T - CLUSTER_CRED_SKEW_MS - 1, &who, &err) == -EACCES,
          "and one from the future");
    static const char *const malformed[] = {
        "", "v1", "v2 1765000000000 0 aa", "v1 x 0 aa", "v1 1765000000000 2 " /* placed 2 */,
        "v1 1765000000000 0 abc", "v1 1765000000000 0 %s trailing",
    };
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
        CHECK(verify(&k, cred(), identity, malformed[i], T, &who, &err) == -EACCES,
              "malformed auth %zu refused", i);
    CHECK(verify(&k, cred(), NULL, auth, T, &who, &err) == -EACCES, "no identity: refused");
    struct cluster_cred nonode = cred();
    nonode.node = NULL;
    CHECK(verify(&k, nonode, identity, auth, T, &who, &err) == -EACCES, "no sender: refused");
}

static void test_public_route_and_bad_identities(void)
{
    struct signurl_key k;
    memset(k.k, 3, sizeof(k.k));
    struct cluster_cred c = cred();
    char identity[CLUSTER_IDENTITY_MAX + 1], auth[CLUSTER_AUTH_MAX + 1];
    cluster_cred_sign(&k, &c, NULL, identity, auth);
    struct auth_identity who = {.authenticated = true};
    struct sbx_err err = {0};
    CHECK(!strcmp(identity, "-") && verify(&k, cred(), identity, auth, T, &who, &err) == 0 &&
              !who.authenticated,
          "a public route's request carries no identity");
    /* The signature of "-" does not carry another identity. */
    static const char *const bad[] = {
        "key_1 bob", "key_1 b@d! member sandbox full_access", "key_1 bob king sandbox full_access",
        "key_1 bob member sandbox full_access extra",
        "key_123456789012345678901 bob member sandbox full_access",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(verify(&k, cred(), bad[i], auth, T, &who, &err) == -EACCES,
              "identity %zu under the signature of another refused", i);
}

static void test_node_urls(void)
{
    CHECK(forward_url_valid("http://127.0.0.1:8787"), "an address and port");
    CHECK(forward_url_valid("http://sbx-node-1.internal:8787"), "a name and port");
    static const char *const bad[] = {"https://10.0.0.1:8787", "http://10.0.0.1",
                                      "http://10.0.0.1:0", "http://10.0.0.1:70000",
                                      "http://u@10.0.0.1:80", "http://10.0.0.1:80/x", "http://:80",
                                      "10.0.0.1:80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!forward_url_valid(bad[i]), "%s is not a node address", bad[i]);
}

int main(void)
{
    test_round_trip_and_tampering();
    test_public_route_and_bad_identities();
    test_node_urls();
    return CHECK_DONE();
}
