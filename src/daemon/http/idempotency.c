#include "idempotency.h"

#include <errno.h>
#include <openssl/evp.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../auth/auth.h"
#include "server.h"
#include "../store/store.h"

struct idem_claim {
    struct store *st;
    char user[AUTH_USER_MAX + 1];
    char key[STORE_IDEM_KEY_MAX + 1];
};

static void request_hash(struct http_req *req, char out[65])
{
    size_t len;
    const char *body = http_req_body(req, &len);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    const char *method = http_req_method(req), *path = http_req_path(req);
    EVP_DigestUpdate(md, method, strlen(method) + 1);
    EVP_DigestUpdate(md, path, strlen(path) + 1);
    EVP_DigestUpdate(md, body, len);
    EVP_DigestFinal_ex(md, d, &dlen);
    EVP_MD_CTX_free(md);
    sbx_hex(d, dlen, out);
}

void idem_finish(struct idem_claim *c, unsigned status, const char *body)
{
    if (!c)
        return;
    struct sbx_err err = {0};
    /* Conflicts and rate limits are about the moment, not the request: a retry with the
     * same key should get a fresh answer. So are our own failures. */
    bool keep = body && status >= 200 && status < 500 && status != 409 && status != 429;
    int r = keep ? store_idem_finish(c->st, c->user, c->key, (int)status, body, &err)
                 : store_idem_release(c->st, c->user, c->key, &err);
    if (r < 0)
        log_error("idempotency key %s of %s: %s", c->key, c->user, err.msg);
    free(c);
}

static void on_answer(struct http_req *req, unsigned status, const char *body, void *data)
{
    idem_finish(data, status, body);
}

struct idem_claim *idem_take(struct http_req *req)
{
    /* The claim is the answer hook's data: detach it from the request. */
    struct idem_claim *c = http_req_answer_data(req, on_answer);
    if (c)
        http_req_on_answer(req, NULL, NULL);
    return c;
}

static bool key_valid(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > STORE_IDEM_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x21 || (unsigned char)k[i] > 0x7e)
            return false;
    return true;
}

int idem_begin(struct store *st, struct http_req *req, idem_replay_fn replay)
{
    const char *key = http_req_header(req, "Idempotency-Key");
    if (!key)
        return 0;
    if (!key_valid(key)) {
        http_respond_errorf(req, "invalid_idempotency_key",
                            "Idempotency-Key must be 1-%d printable ASCII characters",
                            STORE_IDEM_KEY_MAX);
        return 1;
    }
    const char *user = http_req_identity(req)->user;
    char hash[65];
    request_hash(req, hash);
    struct store_idem got;
    struct sbx_err err = {0};
    if (store_idem_begin(st, user, key, hash, sbx_wall_ms() / 1000, &got, &err) < 0) {
        http_respond_error(req, &err);
        return 1;
    }
    switch (got.state) {
    case STORE_IDEM_NEW: {
        struct idem_claim *c = sbx_xcalloc(1, sizeof(*c));
        c->st = st;
        snprintf(c->user, sizeof(c->user), "%s", user);
        snprintf(c->key, sizeof(c->key), "%s", key);
        http_req_on_answer(req, on_answer, c);
        return 0;
    }
    case STORE_IDEM_REPLAY:
        http_req_add_header(req, "x-sbx-idempotent-replay", "true");
        if (replay)
            replay(req, (unsigned)got.status, got.response);
        else
            http_respond_text(req, (unsigned)got.status, got.response);
        break;
    case STORE_IDEM_IN_PROGRESS:
        http_respond_errorf(req, "idempotency_key_in_progress",
                            "a request with this Idempotency-Key is still running");
        break;
    case STORE_IDEM_MISMATCH:
        http_respond_errorf(req, "idempotency_key_mismatch",
                            "this Idempotency-Key was used with a different request");
        break;
    }
    store_idem_clear(&got);
    return 1;
}
