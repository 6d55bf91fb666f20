#include "signurl.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"

int signurl_key_load(const char *path, struct signurl_key *out, struct sbx_err *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = sbx_read_file(path, 4 * SIGNURL_KEY_LEN, &data, &len);
    if (r == 0) {
        bool ok = len == SIGNURL_KEY_LEN;
        if (ok)
            memcpy(out->k, data, SIGNURL_KEY_LEN);
        OPENSSL_cleanse(data, len);
        free(data);
        if (!ok)
            return sbx_err_set(err, EINVAL, "internal", "%s is not a %d-byte key", path,
                               SIGNURL_KEY_LEN);
        return 0;
    }
    if (r != -ENOENT)
        return sbx_err_sys(err, -r, "reading %s", path);
    if (RAND_bytes(out->k, SIGNURL_KEY_LEN) != 1)
        return sbx_err_set(err, EIO, "internal", "no randomness for the link key");
    r = sbx_write_file_atomic(path, out->k, SIGNURL_KEY_LEN, 0600);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    return 0;
}

/* Fields separated by NUL, which none of them can contain, so no two different
 * tuples hash the same message. */
static void mac(const struct signurl_key *key, const char *sandbox_id, const char *path,
                const char *sha256, long long expires, unsigned char md[32])
{
    char exp[24];
    snprintf(exp, sizeof(exp), "%lld", expires);
    const char *parts[] = {"sbx-artifact-v1", sandbox_id, path, sha256, exp};
    size_t total = 0;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(parts); i++)
        total += strlen(parts[i]) + 1;
    _cleanup_free_ unsigned char *msg = sbx_xmalloc(total);
    size_t at = 0;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(parts); i++) {
        size_t n = strlen(parts[i]) + 1;
        memcpy(msg + at, parts[i], n);
        at += n;
    }
    unsigned mdlen = 0;
    if (!HMAC(EVP_sha256(), key->k, SIGNURL_KEY_LEN, msg, total, md, &mdlen) || mdlen != 32)
        abort();
}

void signurl_sign(const struct signurl_key *key, const char *sandbox_id, const char *path,
                  const char *sha256, long long expires, char out[SIGNURL_SIG_HEX_LEN + 1])
{
    unsigned char md[32];
    mac(key, sandbox_id, path, sha256, expires, md);
    sbx_hex(md, sizeof(md), out);
}

bool signurl_verify(const struct signurl_key *key, const char *sandbox_id, const char *path,
                    const char *sha256, long long expires, const char *sig)
{
    char want[SIGNURL_SIG_HEX_LEN + 1];
    signurl_sign(key, sandbox_id, path, sha256, expires, want);
    return sig && strlen(sig) == SIGNURL_SIG_HEX_LEN &&
           CRYPTO_memcmp(want, sig, SIGNURL_SIG_HEX_LEN) == 0;
}
