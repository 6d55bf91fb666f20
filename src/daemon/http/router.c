#include "router.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../auth/auth.h"
#include "../store/store.h"
#include "server.h"

bool router_match(const char *pattern, const char *path, struct http_req *req)
{
    unsigned nparam = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return false;
        p++;
        s++;
        const char *pe = strchrnul(p, '/');
        const char *se = strchrnul(s, '/');
        if (pe - p == 3 && !strncmp(p, "{*}", 3) && !*pe) {
            /* The rest of the path, slashes included. */
            if (!*s)
                return false;
            if (req)
                http_req_set_param(req, nparam, s, strlen(s));
            return true;
        }
        if (pe - p == 2 && !strncmp(p, "{}", 2)) {
            if (se == s)
                return false;
            if (req)
                http_req_set_param(req, nparam, s, (size_t)(se - s));
            nparam++;
        } else if (pe - p != se - s || strncmp(p, s, (size_t)(pe - p))) {
            return false;
        }
        p = pe;
        s = se;
    }
    return !*p && !*s;
}


static int authenticate(struct store *store, struct http_req *req, enum route_auth need,
                        struct sbx_err *err)
{
    const char *h = http_req_header(req, "Authorization");
    if (!h || !*h)
        return sbx_err_set(err, EACCES, "missing_api_key",
                           "send your key as Authorization: Bearer sbx_...");
    if (strncasecmp(h, "Bearer ", 7))
        return sbx_err_set(err, EACCES, "invalid_api_key",
                           "the Authorization header must be Bearer <key>");
    const char *key = h + 7;
    while (*key == ' ')
        key++;
    return router_authenticate_key(store, req, key, need, err);
}

int router_authenticate_key(struct store *store, struct http_req *req, const char *key,
                            enum route_auth need, struct sbx_err *err)
{
    char key_id[AUTH_KEY_ID_LEN + 1];
    int r = auth_key_parse(key, key_id, err);
    if (r < 0)
        return r;
    struct store_key k;
    struct sbx_err lerr = {0};
    r = store_key_get(store, key_id, &k, &lerr);
    char hash[AUTH_HASH_HEX_LEN + 1];
    auth_key_hash(key, hash);
    if (r == -ENOENT || (r == 0 && !auth_hash_equal(hash, k.hash)))
        return sbx_err_set(err, EACCES, "invalid_api_key", "the API key is not valid");
    if (r < 0) {
        *err = lerr;
        return r;
    }
    struct auth_identity *id = http_req_identity(req);
    id->authenticated = true;
    snprintf(id->key_id, sizeof(id->key_id), "%s", k.id);
    snprintf(id->user, sizeof(id->user), "%s", k.user);
    id->role = k.role;
    id->tool_level = k.tool_level;
    id->scope = k.scope;
    return router_allowed(id, need, err);
}

int router_allowed(const struct auth_identity *k, enum route_auth need, struct sbx_err *err)
{
    if (!k->authenticated)
        return sbx_err_set(err, EACCES, "missing_api_key",
                           "send your key as Authorization: Bearer sbx_...");
    if ((need == AUTH_ADMIN || need == AUTH_ADMIN_FULL) && k->role != AUTH_ROLE_ADMIN)
        return sbx_err_set(err, EPERM, "admin_required", "this route needs an admin key");
    if ((need == AUTH_VIEWER_FULL || need == AUTH_ADMIN_FULL) && k->scope != AUTH_SCOPE_FULL)
        return sbx_err_set(err, EPERM, "full_access_required",
                           "configurations need a full-access key; this one is restricted");
    if (need == AUTH_SANDBOX && k->role < AUTH_ROLE_MEMBER)
        return sbx_err_set(err, EPERM, "member_required",
                           "a viewer key reads configurations only; sandboxes need a member "
                           "or admin key");
    if (need == AUTH_SANDBOX && k->tool_level < AUTH_TOOL_SANDBOX)
        return sbx_err_set(err, EPERM, "insufficient_tool_level",
                           "sandbox routes need a key with tool level \"sandbox\"");
    return 0;
}

/* How a pattern ranks against another that matches the same path: at the first segment
 * where one is a literal and the other a capture, the literal wins; "{}" beats "{*}". */
static int segment_rank(const char *seg, size_t n)
{
    if (n == 3 && !strncmp(seg, "{*}", 3))
        return 0;
    if (n == 2 && !strncmp(seg, "{}", 2))
        return 1;
    return 2;
}

static bool more_specific(const char *a, const char *b)
{
    while (*a && *b) {
        a++;
        b++;
        const char *ae = strchrnul(a, '/'), *be = strchrnul(b, '/');
        int ra = segment_rank(a, (size_t)(ae - a)), rb = segment_rank(b, (size_t)(be - b));
        if (ra != rb)
            return ra > rb;
        a = ae;
        b = be;
    }
    return false;
}

/* The route for the request's method and path, or NULL; *path_known says whether any
 * route has that path (so a wrong method is a 405). */
static const struct route *find(const struct router *rt, const char *method, const char *path,
                                bool *path_known)
{
    const struct route *best = NULL;
    *path_known = false;
    for (size_t t = 0; t < rt->ntables; t++) {
        for (size_t i = 0; i < rt->tables[t]->n; i++) {
            const struct route *r = &rt->tables[t]->routes[i];
            if (!router_match(r->pattern, path, NULL))
                continue;
            *path_known = true;
            if (!strcmp(r->method, method) && (!best || more_specific(r->pattern, best->pattern)))
                best = r;
        }
    }
    return best;
}

bool router_streams_body(void *app, const struct http_req *req)
{
    bool known;
    const struct route *r = find(app, http_req_method(req), http_req_path(req), &known);
    return r && (r->flags & ROUTE_STREAM_BODY);
}

/* One line, one O_APPEND write: the daemons of a run share the file. A test knob whose
 * failure changes no answer: not reported. */
static void note_route(const char *file, const struct route *r)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "%s %s\n", r->method, r->pattern);
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (n > 0 && (size_t)n < sizeof(line))
        (void)!write(fd, line, (size_t)n);
    close(fd);
}

void router_dispatch(void *app, struct http_req *req)
{
    const struct router *rt = app;
    const char *method = http_req_method(req);
    const char *path = http_req_path(req);
    bool path_known;
    const struct route *r = find(rt, method, path, &path_known);
    if (!r) {
        if (path_known)
            http_respond_errorf(req, "method_not_allowed", "%s is not allowed on %s", method, path);
        else
            http_respond_errorf(req, "not_found", "no route for %s %s", method, path);
        return;
    }
    (void)router_match(r->pattern, path, req);
    if (rt->route_log)
        note_route(rt->route_log, r);
    struct sbx_err err = {0};
    int by_node = rt->hooks ? rt->hooks->node_auth(rt->hooks->data, req, &err) : 0;
    if (by_node < 0 ||
        (r->auth != AUTH_PUBLIC &&
         (by_node ? router_allowed(http_req_identity(req), r->auth, &err)
                  : authenticate(rt->store, req, r->auth, &err)) < 0)) {
        http_respond_error(req, &err);
        return;
    }
    sbx_log_context(http_req_id(req), http_req_identity(req)->user);
    if (!rt->hooks || !rt->hooks->intercept(rt->hooks->data, r, req))
        r->handler(rt->app, req);
    sbx_log_context(NULL, NULL);
}
