/* This node: its identity, its row in the store and its heartbeat. */
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/template.h"
#include "cluster_internal.h"
#include "forward.h"

static bool node_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > STORE_NODE_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_' || id[i] == '.'))
            return false;
    return true;
}

/* SBX_NODE_ID, else the id this data dir was given at its first start. */
static int load_id(struct cluster *c, struct sbx_err *err)
{
    if (c->cfg->node_id) {
        if (!node_id_valid(c->cfg->node_id))
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_NODE_ID must be 1-%d of [A-Za-z0-9_.-]", STORE_NODE_ID_MAX);
        snprintf(c->id, sizeof(c->id), "%s", c->cfg->node_id);
        return 0;
    }
    _cleanup_free_ char *path = sbx_xasprintf("%s/node.id", c->cfg->data_dir);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = sbx_read_file(path, STORE_NODE_ID_MAX + 2, &text, &len);
    if (r == 0) {
        while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
            text[--len] = '\0';
        if (!node_id_valid(text))
            return sbx_err_set(err, EINVAL, "invalid_config", "%s holds no valid node id", path);
        snprintf(c->id, sizeof(c->id), "%s", text);
        return 0;
    }
    if (r != -ENOENT)
        return sbx_err_sys(err, -r, "reading %s", path);
    sbx_random_id("node-", 5, c->id, sizeof(c->id));
    char line[STORE_NODE_ID_MAX + 2];
    int n = snprintf(line, sizeof(line), "%s\n", c->id);
    if ((r = sbx_write_file_atomic(path, line, (size_t)n, 0644)) < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    return 0;
}

void cluster_templates(const struct cluster *c, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    DIR *d = opendir(c->cfg->template_cache);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        /* A template's name is a link to its current build. */
        if (de->d_type != DT_LNK || !template_name_valid(de->d_name))
            continue;
        size_t n = strlen(de->d_name);
        if (len + n + 2 > cap)
            break;
        if (len)
            out[len++] = ',';
        memcpy(out + len, de->d_name, n + 1);
        len += n;
    }
    if (d)
        closedir(d);
}

static void backends(const struct cluster *c, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (char **b = c->cfg->backends; b && *b; b++) {
        size_t n = strlen(*b);
        if (len + n + 2 > cap)
            break;
        if (len)
            out[len++] = ',';
        memcpy(out + len, *b, n + 1);
        len += n;
    }
}

bool cluster_node_live(const struct cluster *c, const struct store_node *n, long long now_ms)
{
    return !strcmp(n->id, c->id) || now_ms - n->heartbeat_ms <= c->cfg->node_dead_ms;
}

struct key_check {
    struct cluster *c;
    long long now;
    char other[STORE_NODE_ID_MAX + 1];
};

static void check_key(const struct store_node *n, void *data)
{
    struct key_check *k = data;
    if (!k->other[0] && strcmp(n->id, k->c->id) && cluster_node_live(k->c, n, k->now) &&
        strcmp(n->key_fingerprint, k->c->fingerprint))
        snprintf(k->other, sizeof(k->other), "%s", n->id);
}

static void on_beat(struct loop *l, void *data)
{
    struct cluster *c = data;
    char tpl[STORE_NODE_TEMPLATES_MAX + 1];
    cluster_templates(c, tpl, sizeof(tpl));
    /* A missed beat is retried at the next; a store that stays away shows in /metrics. */
    (void)store_node_heartbeat(c->store, c->id, sbx_wall_ms(), tpl, NULL);
    c->beat = loop_timer_add(l, c->cfg->node_heartbeat_ms, on_beat, c);
}

int cluster_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct cluster **out, struct sbx_err *err)
{
    struct cluster *c = sbx_xcalloc(1, sizeof(*c));
    c->cfg = cfg;
    c->loop = l;
    c->store = st;
    _cleanup_free_ char *keyp = sbx_xasprintf("%s/cluster.key", cfg->data_dir);
    int r = load_id(c, err);
    if (r == 0 && (r = signurl_key_load(keyp, &c->key, err)) < 0)
        sbx_err_wrap(err, "the node-to-node key");
    if (r == 0) {
        if (cfg->node_url)
            snprintf(c->url, sizeof(c->url), "%s", cfg->node_url);
        else
            snprintf(c->url, sizeof(c->url), "http://%s", cfg->listen);
        if (!forward_url_valid(c->url))
            r = sbx_err_set(err, EINVAL, "invalid_config",
                            "SBX_NODE_URL must be http://ADDRESS:PORT, what other nodes dial");
    }
    if (r == 0) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        static const char what[] = "sbx node key fingerprint";
        if (!HMAC(EVP_sha256(), c->key.k, sizeof(c->key.k), (const unsigned char *)what,
                  sizeof(what) - 1, md, &mdlen))
            r = sbx_err_set(err, EIO, "internal", "no HMAC for the key fingerprint");
        else
            sbx_hex(md, 8, c->fingerprint);
    }
    if (r == 0)
        r = store_claim_node(st, c->id, err);
    struct key_check k = {.c = c, .now = sbx_wall_ms()};
    if (r == 0 && (r = store_node_each(st, check_key, &k, err)) == 0 && k.other[0])
        r = sbx_err_set(err, EINVAL, "invalid_config",
                        "node %s of this store has another cluster.key: every node needs the "
                        "same one (copy %s from a running node)",
                        k.other, keyp);
    if (r == 0) {
        struct store_node n = {.capacity = cfg->node_capacity,
                               .started_at_ms = k.now,
                               .heartbeat_ms = k.now};
        snprintf(n.id, sizeof(n.id), "%s", c->id);
        snprintf(n.url, sizeof(n.url), "%s", c->url);
        snprintf(n.key_fingerprint, sizeof(n.key_fingerprint), "%s", c->fingerprint);
        cluster_templates(c, n.templates, sizeof(n.templates));
        backends(c, n.backends, sizeof(n.backends));
        r = store_node_register(st, &n, err);
    }
    if (r < 0) {
        cluster_free(c);
        return sbx_err_wrap(err, "node");
    }
    c->beat = loop_timer_add(l, cfg->node_heartbeat_ms, on_beat, c);
    *out = c;
    return 0;
}

void cluster_set_manager(struct cluster *c, struct manager *m, struct sbxd *app)
{
    c->mgr = m;
    c->app = app;
}

const char *cluster_node_id(const struct cluster *c)
{
    return c->id;
}

void cluster_free(struct cluster *c)
{
    if (!c)
        return;
    if (c->beat)
        loop_timer_cancel(c->loop, c->beat);
    free(c);
}
