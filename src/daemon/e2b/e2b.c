#include "e2b.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>
#include <time.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../files/workspace.h"
#include "../http/errors.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/runas.h"
#include "../sbxd.h"

int e2b_access_token(struct sbxd *d, const struct sandbox *sb, char out[E2B_TOKEN_HEX_LEN + 1],
                     struct sbx_err *err)
{
    int r = store_meta_get(d->store, sb->rec.id, E2B_META_TOKEN, out, E2B_TOKEN_HEX_LEN + 1, err);
    if (r == 0 && strlen(out) == E2B_TOKEN_HEX_LEN)
        return 0;
    if (r < 0 && r != -ENOENT)
        return r;
    sbx_random_id("", E2B_TOKEN_HEX_LEN / 2, out, E2B_TOKEN_HEX_LEN + 1);
    return store_meta_set(d->store, sb->rec.id, E2B_META_TOKEN, out, err);
}

bool e2b_token_ok(struct sbxd *d, const struct sandbox *sb, const char *token)
{
    char want[E2B_TOKEN_HEX_LEN + 1];
    struct sbx_err err = {0};
    struct store_key owner;
    /* The token was issued to the sandbox's key: it stops working once that key is gone,
     * or no longer has the rights a sandbox route needs (its role or tool level lowered). */
    struct auth_identity id = {.authenticated = true};
    if (store_key_get(d->store, sb->rec.key_id, &owner, NULL) < 0)
        return false;
    id.role = owner.role;
    id.tool_level = owner.tool_level;
    id.scope = owner.scope;
    if (router_allowed(&id, AUTH_SANDBOX, &err) < 0)
        return false;
    if (!token || strlen(token) != E2B_TOKEN_HEX_LEN ||
        store_meta_get(d->store, sb->rec.id, E2B_META_TOKEN, want, sizeof(want), &err) < 0 ||
        strlen(want) != E2B_TOKEN_HEX_LEN)
        return false;
    return CRYPTO_memcmp(want, token, E2B_TOKEN_HEX_LEN) == 0;
}

void e2b_owner_identity(const struct sandbox *sb, struct auth_identity *out)
{
    memset(out, 0, sizeof(*out));
    out->authenticated = true;
    snprintf(out->key_id, sizeof(out->key_id), "%s", sb->rec.key_id);
    snprintf(out->user, sizeof(out->user), "%s", sb->rec.user);
    out->role = AUTH_ROLE_MEMBER;
    out->tool_level = AUTH_TOOL_SANDBOX;
}

/* The rest of path after prefix when path is prefix itself or below it, else NULL. */
static const char *under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) || (path[n] && path[n] != '/'))
        return NULL;
    return path + n;
}

int e2b_path_to_ws(const char *path, char *out, size_t cap, struct sbx_err *err)
{
    const char *rest = path;
    if (path[0] == '~' && (!path[1] || path[1] == '/'))
        rest = path + 1;
    else if (path[0] == '/' && !(rest = under(path, E2B_HOME)) &&
             !(rest = under(path, E2B_WORKSPACE)))
        return sbx_err_set(err, EPERM, "invalid_path",
                           "only paths under %s (the workspace) are reachable: %.200s", E2B_HOME,
                           path);
    /* Collapse slashes and "." so "/home/user/./a//b" is "a/b"; ".." is refused below. */
    size_t o = 0;
    while (*rest) {
        while (*rest == '/')
            rest++;
        const char *e = strchrnul(rest, '/');
        size_t len = (size_t)(e - rest);
        if (len && !(len == 1 && rest[0] == '.')) {
            if (o + len + 2 > cap)
                return sbx_err_set(err, ENAMETOOLONG, "invalid_path", "the path is too long");
            if (o)
                out[o++] = '/';
            memcpy(out + o, rest, len);
            o += len;
        }
        rest = e;
    }
    out[o] = '\0';
    return ws_path_check(out, true, err);
}

char *e2b_ws_to_path(const char *rel)
{
    return *rel ? sbx_xasprintf("%s/%s", E2B_HOME, rel) : sbx_xstrdup(E2B_HOME);
}

const char *e2b_domain(struct sbxd *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", d->cfg.e2b_domain);
    return buf;
}

json_t *e2b_rfc3339(long long unix_s)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    char s[32];
    gmtime_r(&t, &tm);
    strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(s);
}

json_t *e2b_sandbox_info(struct sbxd *d, const struct sandbox *sb)
{
    const struct store_sandbox *r = &sb->rec;
    char tmpl[STORE_NAME_MAX + 1], meta[E2B_METADATA_MAX];
    struct sbx_err err = {0};
    if (store_meta_get(d->store, r->id, E2B_META_TEMPLATE, tmpl, sizeof(tmpl), &err) < 0)
        snprintf(tmpl, sizeof(tmpl), "%s", r->template_name);
    json_t *metadata = NULL;
    if (store_meta_get(d->store, r->id, E2B_META_METADATA, meta, sizeof(meta), &err) == 0)
        metadata = json_loads(meta, 0, NULL);
    long long cpus = (r->cpu_millicores + 999) / 1000;
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:o,s:s,s:s,s:o}", "sandboxID", r->id, "templateID", tmpl,
        "alias", tmpl, "clientID", "sbx", "cpuCount", (json_int_t)(cpus > 0 ? cpus : 1), "memoryMB",
        (json_int_t)r->memory_mb, "diskSizeMB", (json_int_t)0, "startedAt",
        e2b_rfc3339(r->created_at), "endAt", e2b_rfc3339(r->expires_at), "state",
        sb->paused ? "paused" : "running", "envdVersion", E2B_ENVD_VERSION, "metadata",
        json_is_object(metadata) ? json_incref(metadata) : json_object());
    json_decref(metadata);
    return o;
}

int e2b_user(struct http_req *req, const struct sandbox *sb, const char **user, struct sbx_err *err)
{
    *user = NULL;
    const char *h = http_req_header(req, "Authorization");
    if (!h)
        return 0;
    if (strncasecmp(h, "Basic ", 6))
        return sbx_err_set(err, EINVAL, "invalid_user", "Authorization must be Basic <user>:");
    unsigned char raw[64];
    size_t n = strlen(h + 6);
    if (n > 4 * (sizeof(raw) / 3) || sbx_base64_decode(h + 6, n, raw, &n) < 0)
        return sbx_err_set(err, EINVAL, "invalid_user", "Authorization is not Basic <user>:");
    char name[64];
    const unsigned char *colon = memchr(raw, ':', n);
    size_t len = colon ? (size_t)(colon - raw) : n;
    snprintf(name, sizeof(name), "%.*s", (int)len, (const char *)raw);
    json_t *v = json_stringn_nocheck(name, strlen(name));
    int r = runas_parse(v, user, err);
    json_decref(v);
    if (r < 0)
        return sbx_err_set(err, EINVAL, "invalid_user", "invalid username: '%.32s'", name);
    return runas_check(sb, *user, err);
}

void e2b_fail(struct http_req *req, const struct sbx_err *err)
{
    const char *code = err->code[0] ? err->code : "internal";
    unsigned status = http_status_for_code(code);
    http_respond_json(req, status,
                      json_pack("{s:i,s:s,s:s}", "code", (int)status, "message",
                                err->msg[0] ? err->msg : code, "error_code", code));
}

/* The key from X-API-KEY (or Bearer), checked as the router checks ours. */
int e2b_authenticate(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *key = http_req_header(req, "X-API-KEY");
    const char *h = http_req_header(req, "Authorization");
    if ((!key || !*key) && h && !strncasecmp(h, "Bearer ", 7))
        key = h + 7;
    if (!key || !*key) {
        sbx_err_set(&err, EACCES, "missing_api_key", "send your sbx key as X-API-KEY");
    } else if (router_authenticate_key(d->store, req, key, AUTH_SANDBOX, &err) == 0) {
        return 0;
    }
    e2b_fail(req, &err);
    return -1;
}

int e2b_begin(struct sbxd *d, struct http_req *req, json_t **body, struct sbx_err *err)
{
    if (e2b_authenticate(d, req) < 0)
        return 1;
    return http_req_json(req, body, err);
}
