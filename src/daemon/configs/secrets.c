#include "secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"

#define KEY_LEN 32
#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX "sbxenc:v1:"

struct secrets {
    unsigned char key[KEY_LEN];
};

static int read_key(int fd, unsigned char key[KEY_LEN], const char *path, struct sbx_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sbx_err_sys(err, errno, "stat %s", path);
    if ((st.st_mode & 077) != 0)
        return sbx_err_set(err, EPERM, "internal", "%s must be readable by its owner only", path);
    ssize_t n = read(fd, key, KEY_LEN);
    if (n != KEY_LEN)
        return sbx_err_set(err, EIO, "internal", "%s: expected %d bytes", path, KEY_LEN);
    return 0;
}

int secrets_open(const char *data_dir, struct secrets **out, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/%s", data_dir, SECRETS_KEY_FILE);
    struct secrets *s = sbx_xcalloc(1, sizeof(*s));
    int r;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        r = read_key(fd, s->key, path, err);
        close(fd);
    } else if (errno == ENOENT) {
        if (RAND_bytes(s->key, KEY_LEN) != 1) {
            r = sbx_err_set(err, EIO, "internal", "no randomness for the secrets key");
        } else {
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
            if (fd < 0) {
                r = sbx_err_sys(err, errno, "creating %s", path);
            } else {
                int w = sbx_write_all(fd, s->key, KEY_LEN);
                if (w == 0 && fsync(fd) < 0)
                    w = -errno;
                close(fd);
                r = w < 0 ? sbx_err_sys(err, -w, "writing %s", path) : 0;
                if (r < 0)
                    unlink(path);
            }
        }
    } else {
        r = sbx_err_sys(err, errno, "opening %s", path);
    }
    if (r < 0) {
        secrets_free(s);
        return r;
    }
    *out = s;
    return 0;
}

void secrets_free(struct secrets *s)
{
    if (!s)
        return;
    OPENSSL_cleanse(s->key, sizeof(s->key));
    free(s);
}

bool secrets_is_sealed(const char *v)
{
    return v && !strncmp(v, PREFIX, strlen(PREFIX));
}

void secrets_drop(char *plain)
{
    if (!plain)
        return;
    OPENSSL_cleanse(plain, strlen(plain));
    free(plain);
}

/* One AES-256-GCM pass: encrypt (enc) or decrypt in into out, with the tag. */
static bool gcm(const struct secrets *s, bool enc, const unsigned char *nonce, const char *aad,
                const unsigned char *in, int len, unsigned char *out, unsigned char *tag)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    bool ok = c && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
              EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
              EVP_CipherInit_ex(c, NULL, NULL, s->key, nonce, enc) == 1 &&
              EVP_CipherUpdate(c, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) == 1 &&
              EVP_CipherUpdate(c, out, &n, in, len) == 1 &&
              (enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1) &&
              EVP_CipherFinal_ex(c, out + n, &fin) == 1 &&
              (!enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1);
    EVP_CIPHER_CTX_free(c);
    return ok;
}

int secrets_seal(const struct secrets *s, const char *context, const char *plain, char **out,
                 struct sbx_err *err)
{
    size_t len = strlen(plain);
    if (len > SECRETS_VALUE_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "a secret is at most %d bytes",
                           SECRETS_VALUE_MAX);
    size_t total = NONCE_LEN + TAG_LEN + len;
    unsigned char *buf = sbx_xmalloc(total + 1);
    int r = 0;
    if (RAND_bytes(buf, NONCE_LEN) != 1 ||
        !gcm(s, true, buf, context, (const unsigned char *)plain, (int)len,
             buf + NONCE_LEN + TAG_LEN, buf + NONCE_LEN)) {
        r = sbx_err_set(err, EIO, "internal", "sealing a secret failed");
    } else {
        _cleanup_free_ char *b64 = sbx_base64_encode(buf, total);
        *out = sbx_xasprintf("%s%s", PREFIX, b64);
    }
    OPENSSL_cleanse(buf, total);
    free(buf);
    return r;
}

int secrets_open_value(const struct secrets *s, const char *context, const char *sealed, char **out,
                       struct sbx_err *err)
{
    if (!secrets_is_sealed(sealed))
        return sbx_err_set(err, EINVAL, "secret_unreadable", "a stored secret is not sealed");
    const char *b64 = sealed + strlen(PREFIX);
    size_t blen = strlen(b64);
    if (blen % 4 || blen > 4 * ((NONCE_LEN + TAG_LEN + SECRETS_VALUE_MAX + 2) / 3 + 1))
        return sbx_err_set(err, EINVAL, "secret_unreadable", "a stored secret is malformed");
    unsigned char *raw = sbx_xmalloc(blen / 4 * 3 + 1);
    int n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)blen);
    /* EVP_DecodeBlock counts the padding as bytes. */
    if (n > 0 && blen >= 1 && b64[blen - 1] == '=')
        n--;
    if (n > 0 && blen >= 2 && b64[blen - 2] == '=')
        n--;
    int r = 0;
    if (n < NONCE_LEN + TAG_LEN) {
        r = sbx_err_set(err, EINVAL, "secret_unreadable", "a stored secret is malformed");
    } else {
        int len = n - NONCE_LEN - TAG_LEN;
        char *plain = sbx_xmalloc((size_t)len + 1);
        if (!gcm(s, false, raw, context, raw + NONCE_LEN + TAG_LEN, len, (unsigned char *)plain,
                 raw + NONCE_LEN) ||
            memchr(plain, '\0', (size_t)len)) {
            OPENSSL_cleanse(plain, (size_t)len);
            free(plain);
            r = sbx_err_set(err, EINVAL, "secret_unreadable",
                            "a stored secret does not open with this data dir's key");
        } else {
            plain[len] = '\0';
            *out = plain;
        }
    }
    free(raw);
    return r;
}
