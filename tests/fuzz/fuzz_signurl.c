/* libFuzzer target for signed links (src/daemon/auth/signurl.c), the only credential a
 * download or preview link carries.
 *
 * Input: sandbox id, path, digest and signature separated by NUL bytes, then 8 bytes of
 * expiry. Invariants: a signature is 64 lower-case hex digits; a link verifies exactly
 * when its signature is the one signed for its fields (so any other signature, and any
 * change to a field, voids it); verification never reads past a short signature.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/auth/signurl.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    long long expires;
    memcpy(&expires, data + size - 8, 8);
    char *buf = calloc(1, size - 8 + 4); /* NUL-padded: missing fields are "" */
    memcpy(buf, data, size - 8);
    const char *f[4];
    const char *p = buf;
    for (int i = 0; i < 4; i++) {
        f[i] = p;
        p += strlen(p) + (p < buf + size - 8 ? 1 : 0);
        if (p > buf + size - 8)
            p = buf + size - 8;
    }
    static const struct signurl_key key = {.k = "0123456789abcdef0123456789abcdef"};
    char sig[SIGNURL_SIG_HEX_LEN + 1];
    signurl_sign(&key, f[0], f[1], f[2], expires, sig);
    REQUIRE(strlen(sig) == SIGNURL_SIG_HEX_LEN);
    for (size_t i = 0; i < SIGNURL_SIG_HEX_LEN; i++)
        REQUIRE((sig[i] >= '0' && sig[i] <= '9') || (sig[i] >= 'a' && sig[i] <= 'f'));
    REQUIRE(signurl_verify(&key, f[0], f[1], f[2], expires, sig));
    REQUIRE(!signurl_verify(&key, f[0], f[1], f[2], expires, NULL));
    REQUIRE(signurl_verify(&key, f[0], f[1], f[2], expires, f[3]) == !strcmp(sig, f[3]));
    REQUIRE(!signurl_verify(&key, f[0], f[1], f[2], expires ^ 1, sig));
    /* The same fields with one byte moved from path to sandbox id: another link. */
    if (f[1][0]) {
        size_t n0 = strlen(f[0]);
        char *id = malloc(n0 + 2);
        memcpy(id, f[0], n0);
        id[n0] = f[1][0];
        id[n0 + 1] = '\0';
        REQUIRE(!signurl_verify(&key, id, f[1] + 1, f[2], expires, sig));
        free(id);
    }
    free(buf);
    return 0;
}
