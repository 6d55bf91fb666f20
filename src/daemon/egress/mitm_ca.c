#include "mitm_ca.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/util.h"

#define CA_DAYS 3650
#define LEAF_DAYS 7

struct leaf {
    char host[256];
    X509 *cert;
};

struct mitm_ca {
    EVP_PKEY *key; /* the CA's */
    X509 *cert;
    char *pem;
    EVP_PKEY *leaf_key; /* one key for every leaf of this run */
    SSL_CTX *server_ctx, *client_ctx;
    struct leaf leaves[MITM_LEAF_CACHE];
    unsigned next_leaf;
};

static EVP_PKEY *new_key(void)
{
    return EVP_EC_gen("P-256");
}

static int set_serial(X509 *x)
{
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -1;
    raw[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(raw, sizeof(raw), NULL);
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    return ok ? 0 : -1;
}

static bool add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = e && X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok;
}

static X509 *make_cert(EVP_PKEY *pub, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, long days,
                       bool ca, const char *san)
{
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    bool ok = x && name && X509_set_version(x, 2) == 1 && set_serial(x) == 0 &&
              X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
              X509_gmtime_adj(X509_getm_notAfter(x), days * 86400L) &&
              X509_set_pubkey(x, pub) == 1 &&
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                         -1, 0) == 1 &&
              X509_set_subject_name(x, name) == 1 &&
              X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1;
    X509 *iss = issuer ? issuer : x;
    if (ok && ca)
        ok = add_ext(iss, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_ext(iss, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_ext(iss, x, NID_subject_key_identifier, "hash");
    if (ok && !ca)
        ok = add_ext(iss, x, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(iss, x, NID_ext_key_usage, "serverAuth") &&
             add_ext(iss, x, NID_subject_alt_name, san) &&
             add_ext(iss, x, NID_authority_key_identifier, "keyid:always");
    if (ok)
        ok = X509_sign(x, issuer_key, EVP_sha256()) > 0;
    X509_NAME_free(name);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int write_private(const char *path, const void *buf, size_t len, struct sbx_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sbx_err_sys(err, errno, "creating %s", path);
    int w = sbx_write_all(fd, buf, len);
    if (w == 0 && fsync(fd) < 0)
        w = -errno;
    close(fd);
    if (w < 0) {
        unlink(path);
        return sbx_err_sys(err, -w, "writing %s", path);
    }
    return 0;
}

static char *bio_text(BIO *b)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *s = sbx_xmalloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    return s;
}

static int create_ca(struct mitm_ca *ca, const char *kpath, const char *cpath, struct sbx_err *err)
{
    ca->key = new_key();
    ca->cert =
        ca->key ? make_cert(ca->key, "sbx egress CA", NULL, ca->key, CA_DAYS, true, NULL) : NULL;
    if (!ca->cert)
        return sbx_err_set(err, EIO, "internal", "making the egress CA failed");
    BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
    int r = 0;
    if (!kb || !cb || PEM_write_bio_PrivateKey(kb, ca->key, NULL, NULL, 0, NULL, NULL) != 1 ||
        PEM_write_bio_X509(cb, ca->cert) != 1) {
        r = sbx_err_set(err, EIO, "internal", "encoding the egress CA failed");
    } else {
        _cleanup_free_ char *ktext = bio_text(kb);
        _cleanup_free_ char *ctext = bio_text(cb);
        r = write_private(kpath, ktext, strlen(ktext), err);
        if (r == 0 && (r = sbx_write_file_atomic(cpath, ctext, strlen(ctext), 0644)) < 0)
            r = sbx_err_sys(err, -r, "writing %s", cpath);
        OPENSSL_cleanse(ktext, strlen(ktext));
    }
    BIO_free(kb);
    BIO_free(cb);
    return r;
}

static int load_ca(struct mitm_ca *ca, const char *kpath, const char *cpath, struct sbx_err *err)
{
    struct stat st;
    if (stat(kpath, &st) == 0 && (st.st_mode & 077))
        return sbx_err_set(err, EPERM, "internal", "%s must be readable by its owner only", kpath);
    FILE *kf = fopen(kpath, "re"), *cf = fopen(cpath, "re");
    if (kf)
        ca->key = PEM_read_PrivateKey(kf, NULL, NULL, NULL);
    if (cf)
        ca->cert = PEM_read_X509(cf, NULL, NULL, NULL);
    if (kf)
        fclose(kf);
    if (cf)
        fclose(cf);
    if (!ca->key || !ca->cert || X509_check_private_key(ca->cert, ca->key) != 1)
        return sbx_err_set(err, EINVAL, "internal", "%s and %s do not make a CA", kpath, cpath);
    return 0;
}

int mitm_ca_open(const char *data_dir, const char *extra_ca, struct mitm_ca **out,
                 struct sbx_err *err)
{
    struct mitm_ca *ca = sbx_xcalloc(1, sizeof(*ca));
    _cleanup_free_ char *kpath = sbx_xasprintf("%s/%s", data_dir, MITM_CA_KEY_FILE);
    _cleanup_free_ char *cpath = sbx_xasprintf("%s/%s", data_dir, MITM_CA_CERT_FILE);
    int r = access(kpath, F_OK) == 0 ? load_ca(ca, kpath, cpath, err)
                                     : create_ca(ca, kpath, cpath, err);
    if (r == 0) {
        BIO *b = BIO_new(BIO_s_mem());
        if (b && PEM_write_bio_X509(b, ca->cert) == 1)
            ca->pem = bio_text(b);
        BIO_free(b);
        ca->leaf_key = new_key();
        ca->server_ctx = SSL_CTX_new(TLS_server_method());
        ca->client_ctx = SSL_CTX_new(TLS_client_method());
        if (!ca->pem || !ca->leaf_key || !ca->server_ctx || !ca->client_ctx)
            r = sbx_err_set(err, EIO, "internal", "setting up the egress TLS contexts failed");
    }
    if (r == 0) {
        SSL_CTX_set_min_proto_version(ca->server_ctx, TLS1_2_VERSION);
        SSL_CTX_set_min_proto_version(ca->client_ctx, TLS1_2_VERSION);
        /* Only HTTP/1.1 is read and rewritten. */
        static const unsigned char alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
        SSL_CTX_set_alpn_protos(ca->client_ctx, alpn, sizeof(alpn));
        SSL_CTX_set_verify(ca->client_ctx, SSL_VERIFY_PEER, NULL);
        if (SSL_CTX_set_default_verify_paths(ca->client_ctx) != 1 ||
            (extra_ca && SSL_CTX_load_verify_locations(ca->client_ctx, extra_ca, NULL) != 1))
            r = sbx_err_set(err, EINVAL, "internal", "loading the upstream roots%s%s failed",
                            extra_ca ? " and " : "", extra_ca ? extra_ca : "");
    }
    if (r < 0) {
        mitm_ca_free(ca);
        return r;
    }
    *out = ca;
    return 0;
}

void mitm_ca_free(struct mitm_ca *ca)
{
    if (!ca)
        return;
    for (unsigned i = 0; i < MITM_LEAF_CACHE; i++)
        X509_free(ca->leaves[i].cert);
    SSL_CTX_free(ca->server_ctx);
    SSL_CTX_free(ca->client_ctx);
    EVP_PKEY_free(ca->leaf_key);
    EVP_PKEY_free(ca->key);
    X509_free(ca->cert);
    free(ca->pem);
    free(ca);
}

const char *mitm_ca_pem(const struct mitm_ca *ca)
{
    return ca->pem;
}

static X509 *leaf_for(struct mitm_ca *ca, const char *host)
{
    for (unsigned i = 0; i < MITM_LEAF_CACHE; i++)
        if (ca->leaves[i].cert && !strcmp(ca->leaves[i].host, host))
            return ca->leaves[i].cert;
    if (strlen(host) >= sizeof(ca->leaves[0].host))
        return NULL;
    _cleanup_free_ char *san = sbx_xasprintf("DNS:%s", host);
    X509 *x = make_cert(ca->leaf_key, host, ca->cert, ca->key, LEAF_DAYS, false, san);
    if (!x)
        return NULL;
    struct leaf *l = &ca->leaves[ca->next_leaf++ % MITM_LEAF_CACHE];
    X509_free(l->cert);
    l->cert = x;
    snprintf(l->host, sizeof(l->host), "%s", host);
    return x;
}

SSL *mitm_ca_server(struct mitm_ca *ca, const char *host, struct sbx_err *err)
{
    X509 *leaf = leaf_for(ca, host);
    SSL *s = leaf ? SSL_new(ca->server_ctx) : NULL;
    if (!s || SSL_use_certificate(s, leaf) != 1 || SSL_use_PrivateKey(s, ca->leaf_key) != 1 ||
        SSL_add1_chain_cert(s, ca->cert) != 1) {
        SSL_free(s);
        sbx_err_set(err, EIO, "internal", "a certificate for %s could not be made", host);
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

SSL *mitm_ca_client(struct mitm_ca *ca, const char *host, struct sbx_err *err)
{
    SSL *s = SSL_new(ca->client_ctx);
    if (!s || SSL_set_tlsext_host_name(s, host) != 1 || SSL_set1_host(s, host) != 1) {
        SSL_free(s);
        sbx_err_set(err, EIO, "internal", "a TLS client for %s could not be made", host);
        return NULL;
    }
    SSL_set_connect_state(s);
    return s;
}
