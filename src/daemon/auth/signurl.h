/* Signed download links: HMAC-SHA256 over what a link grants (sandbox, path, content
 * digest, expiry) with a secret kept in the data dir (0600), so a link works without a
 * key and any change to it — another path, sandbox, digest or expiry — voids it. */
#ifndef SBX_SIGNURL_H
#define SBX_SIGNURL_H

#include <stdbool.h>

#include "../../common/err.h"

#define SIGNURL_KEY_LEN 32
#define SIGNURL_SIG_HEX_LEN 64

struct signurl_key {
    unsigned char k[SIGNURL_KEY_LEN];
};

/* Read the secret at path, or create it (random, 0600) when there is none. */
int signurl_key_load(const char *path, struct signurl_key *out, struct sbx_err *err);

void signurl_sign(const struct signurl_key *key, const char *sandbox_id, const char *path,
                  const char *sha256, long long expires, char out[SIGNURL_SIG_HEX_LEN + 1]);
/* Constant-time comparison against a signature from a link. */
bool signurl_verify(const struct signurl_key *key, const char *sandbox_id, const char *path,
                    const char *sha256, long long expires, const char *sig);

#endif
