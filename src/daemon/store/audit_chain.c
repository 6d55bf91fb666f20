/* The audit log: append-only rows, each carrying the SHA-256 of its own fields and of
 * the previous row's hash. Editing, reordering or deleting any row breaks the chain at
 * that row; the head (last seq and hash) is kept apart so that cutting off the tail is
 * seen too. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "store_internal.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* Length-prefixed fields, so no two different entries hash the same bytes. */
static void put_field(EVP_MD_CTX *md, const char *v)
{
    char len[32];
    size_t n = v ? strlen(v) : 0;
    int k = snprintf(len, sizeof(len), "%c%zu:", v ? 's' : 'n', n);
    EVP_DigestUpdate(md, len, (size_t)k);
    if (n)
        EVP_DigestUpdate(md, v, n);
}

void store_audit_hash(const struct store_audit_entry *e, char out[65])
{
    char num[64];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    put_field(md, e->prev_hash);
    snprintf(num, sizeof(num), "%lld/%lld", e->seq, e->ts_ms);
    put_field(md, num);
    put_field(md, e->user);
    put_field(md, e->key_id);
    put_field(md, e->action);
    put_field(md, e->sandbox_id);
    put_field(md, e->outcome);
    put_field(md, e->request_id);
    put_field(md, e->details);
    EVP_DigestFinal_ex(md, digest, &dlen);
    EVP_MD_CTX_free(md);
    sbx_hex(digest, dlen, out);
}

static int append_locked(struct store *s, struct store_audit_entry *e, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT seq, hash FROM audit_head WHERE id=1", "");
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        e->seq = db_col_int64(st, 0) + 1;
        db_col_copy(st, 1, e->prev_hash, sizeof(e->prev_hash));
    } else if (r == DB_DONE) {
        e->seq = 1;
        snprintf(e->prev_hash, sizeof(e->prev_hash), "%s", ZERO_HASH);
    }
    db_finalize(st);
    if (r < 0)
        return r;
    store_audit_hash(e, e->hash);
    r = db_query(s->conn, &st, err,
                 "INSERT INTO audit(seq,ts_ms,\"user\",key_id,action,sandbox_id,outcome,"
                 "request_id,details,prev_hash,hash) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                 "iittttttttt", e->seq, e->ts_ms, e->user, e->key_id, e->action, e->sandbox_id,
                 e->outcome, e->request_id, e->details, e->prev_hash, e->hash);
    if (r < 0 || (r = db_run(st, err)) < 0)
        return r;
    r = db_query(s->conn, &st, err,
                 "INSERT INTO audit_head(id,seq,hash) VALUES(1,?,?) "
                 "ON CONFLICT(id) DO UPDATE SET seq=excluded.seq, hash=excluded.hash",
                 "it", e->seq, e->hash);
    return r < 0 ? r : db_run(st, err);
}

/* Under the store-wide write lock: every node appends to the one chain in turn. */
int store_audit_append(struct store *s, const struct store_audit_entry *in, struct sbx_err *err)
{
    struct store_audit_entry e = *in;
    int r = db_tx_begin(s->conn, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    r = append_locked(s, &e, err);
    if (r < 0) {
        (void)db_tx_end(s->conn, false, NULL);
        return r;
    }
    return db_tx_end(s->conn, true, err);
}

#define AUDIT_COLS                                                                                 \
    "seq,ts_ms,\"user\",key_id,action,sandbox_id,outcome,request_id,details,prev_hash,hash"

/* Over a domain tag, the seq and the hash, NUL-separated (none contains a NUL). */
static void anchor_sign(const struct store_anchor_key *key, long long seq, const char *hash,
                        char out[65])
{
    char msg[128];
    int n = snprintf(msg, sizeof(msg), "sbx-audit-anchor-v1%c%lld%c%s", 0, seq, 0, hash);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (n < 0 || (size_t)n >= sizeof(msg) ||
        !HMAC(EVP_sha256(), key->k, sizeof(key->k), (unsigned char *)msg, (size_t)n, md, &mdlen) ||
        mdlen != 32)
        abort();
    sbx_hex(md, mdlen, out);
}

/* 0 and anchor->seq 0 when nothing was ever pruned. */
static int anchor_get(struct store *s, struct store_audit_anchor *a, struct sbx_err *err)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->hash, sizeof(a->hash), "%s", ZERO_HASH);
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT seq, hash, pruned_at_ms, signature FROM audit_anchor", "");
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW) {
        a->present = true;
        a->seq = db_col_int64(st, 0);
        db_col_copy(st, 1, a->hash, sizeof(a->hash));
        a->pruned_at_ms = db_col_int64(st, 2);
        db_col_copy(st, 3, a->signature, sizeof(a->signature));
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}

static void row_to_entry(struct db_stmt *st, struct store_audit_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->seq = db_col_int64(st, 0);
    e->ts_ms = db_col_int64(st, 1);
    e->user = db_col_text(st, 2);
    e->key_id = db_col_text(st, 3);
    e->action = db_col_text(st, 4);
    e->sandbox_id = db_col_text(st, 5);
    e->outcome = db_col_text(st, 6);
    e->request_id = db_col_text(st, 7);
    e->details = db_col_text(st, 8);
    db_col_copy(st, 9, e->prev_hash, sizeof(e->prev_hash));
    db_col_copy(st, 10, e->hash, sizeof(e->hash));
}

int store_audit_query(struct store *s, const struct store_audit_filter *f, store_audit_cb cb,
                      void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " AUDIT_COLS " FROM audit WHERE seq > ?1"
                     " AND (?2 IS NULL OR \"user\" = ?2) AND (?3 IS NULL OR sandbox_id = ?3)"
                     " AND (?4 IS NULL OR action = ?4) AND (?5 = 0 OR ts_ms >= ?5)"
                     " AND (?6 = 0 OR ts_ms <= ?6) ORDER BY seq LIMIT ?7",
                     "itttiii", f->after_seq, f->user, f->sandbox_id, f->action, f->since_ms,
                     f->until_ms, (long long)f->limit);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_audit_entry e;
        row_to_entry(st, &e);
        cb(&e, data);
    }
    db_finalize(st);
    return r;
}

static void fail(struct store_audit_verdict *v, long long seq, const char *reason)
{
    if (!v->ok)
        return;
    v->ok = false;
    v->bad_seq = seq;
    snprintf(v->reason, sizeof(v->reason), "%s", reason);
}

/* Walks the entries after the anchor, calling check on each in order; stops at the first
 * one check refuses. */
struct chain_walk {
    struct store_audit_verdict v;
    char prev[65];
    long long want_seq;
};

static void check_entry(struct chain_walk *w, const struct store_audit_entry *e)
{
    char h[65];
    store_audit_hash(e, h);
    if (e->seq != w->want_seq)
        fail(&w->v, w->want_seq, "an entry is missing (sequence gap)");
    else if (strcmp(e->prev_hash, w->prev))
        fail(&w->v, e->seq, "the entry does not follow the one before it");
    else if (strcmp(h, e->hash))
        fail(&w->v, e->seq, "the entry's content does not match its hash");
    snprintf(w->prev, sizeof(w->prev), "%s", e->hash);
    w->want_seq++;
    w->v.checked++;
}

static void walk_from(struct chain_walk *w, const struct store_audit_anchor *a)
{
    memset(w, 0, sizeof(*w));
    w->v.ok = true;
    snprintf(w->prev, sizeof(w->prev), "%s", a->hash);
    w->want_seq = a->seq + 1;
}

static int prune_locked(struct store *s, const struct store_prune *p, long long now_ms,
                        const struct store_anchor_key *key, long long *removed, struct sbx_err *err)
{
    struct store_audit_anchor a;
    int r = anchor_get(s, &a, err);
    if (r < 0)
        return r;
    struct db_stmt *st;
    long long head = 0;
    if ((r = db_query(s->conn, &st, err, "SELECT seq FROM audit_head WHERE id=1", "")) < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        head = db_col_int64(st, 0);
    db_finalize(st);
    if (r < 0)
        return r;
    r = db_query(s->conn, &st, err,
                 "SELECT " AUDIT_COLS " FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", "ii", a.seq,
                 (long long)p->batch);
    if (r < 0)
        return r;
    struct chain_walk w;
    walk_from(&w, &a);
    long long last = 0;
    char last_hash[65] = "";
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_audit_entry e;
        row_to_entry(st, &e);
        if (e.ts_ms >= p->before_ms && !(p->keep > 0 && e.seq <= head - p->keep))
            break;
        check_entry(&w, &e);
        if (!w.v.ok)
            break;
        last = e.seq;
        snprintf(last_hash, sizeof(last_hash), "%s", e.hash);
    }
    db_finalize(st);
    if (r < 0)
        return r;
    /* An anchor must never vouch for entries that do not verify: they stay, as evidence. */
    if (!w.v.ok)
        return sbx_err_set(err, EBADMSG, "internal",
                           "the audit chain does not verify at entry %lld (%s): not pruned",
                           w.v.bad_seq, w.v.reason);
    if (!last)
        return 0;
    if ((r = db_query(s->conn, &st, err, "DELETE FROM audit WHERE seq <= ?", "i", last)) < 0)
        return r;
    if ((r = db_run_changes(st, removed, err)) < 0)
        return r;
    char sig[65];
    anchor_sign(key, last, last_hash, sig);
    r = db_query(s->conn, &st, err,
                 "INSERT INTO audit_anchor(id,seq,hash,pruned_at_ms,signature) VALUES(1,?,?,?,?) "
                 "ON CONFLICT(id) DO UPDATE SET seq=excluded.seq, hash=excluded.hash,"
                 " pruned_at_ms=excluded.pruned_at_ms, signature=excluded.signature",
                 "itit", last, last_hash, now_ms, sig);
    return r < 0 ? r : db_run(st, err);
}

int store_audit_prune(struct store *s, const struct store_prune *p, long long now_ms,
                      const struct store_anchor_key *key, long long *removed, struct sbx_err *err)
{
    *removed = 0;
    int r = db_tx_begin(s->conn, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    r = prune_locked(s, p, now_ms, key, removed, err);
    if (r < 0) {
        (void)db_tx_end(s->conn, false, NULL);
        *removed = 0;
        return r;
    }
    if ((r = db_tx_end(s->conn, true, err)) < 0)
        *removed = 0;
    return r;
}

int store_audit_verify(struct store *s, const struct store_anchor_key *key,
                       struct store_audit_verdict *out, struct sbx_err *err)
{
    struct store_audit_anchor a;
    int r = anchor_get(s, &a, err);
    if (r < 0)
        return r;
    struct chain_walk w;
    walk_from(&w, &a);
    if (a.present) {
        char want[65];
        anchor_sign(key, a.seq, a.hash, want);
        if (strlen(a.signature) != 64 || CRYPTO_memcmp(want, a.signature, 64))
            fail(&w.v, a.seq, "the anchor of the pruned entries does not verify (its signature)");
    }
    struct db_stmt *st;
    r = db_query(s->conn, &st, err, "SELECT " AUDIT_COLS " FROM audit WHERE seq > ? ORDER BY seq",
                 "i", a.seq);
    if (r < 0)
        return r;
    while (w.v.ok && (r = db_step(st, err)) == DB_ROW) {
        struct store_audit_entry e;
        row_to_entry(st, &e);
        check_entry(&w, &e);
    }
    db_finalize(st);
    if (r < 0)
        return r;
    if (w.v.ok) {
        r = db_query(s->conn, &st, err, "SELECT seq, hash FROM audit_head WHERE id=1", "");
        if (r < 0)
            return r;
        r = db_step(st, err);
        if (r == DB_ROW) {
            char head[65];
            db_col_copy(st, 1, head, sizeof(head));
            if (db_col_int64(st, 0) != w.want_seq - 1 || strcmp(head, w.prev))
                fail(&w.v, w.want_seq, "entries after this one were removed");
        } else if (r == DB_DONE && w.want_seq != 1) {
            fail(&w.v, 1, "the chain's head record is missing");
        }
        db_finalize(st);
        if (r < 0)
            return r;
    }
    w.v.anchor = a;
    *out = w.v;
    return 0;
}
