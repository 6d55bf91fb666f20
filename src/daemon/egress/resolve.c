#include "resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../common/jobs.h"
#include "policy.h"

struct hosts_entry {
    char name[EGRESS_HOST_MAX + 1];
    struct egress_addr addr;
};

struct test_upstream {
    struct egress_addr addr;
    unsigned port;
};

struct egress_resolver {
    struct jobs *jobs;
    struct hosts_entry *hosts; /* the test hosts file, when given */
    size_t nhosts;
    bool use_hosts;
    struct egress_addr *self; /* this machine's interface addresses */
    size_t nself;
    struct test_upstream upstreams[EGRESS_TEST_UPSTREAMS_MAX];
    size_t nupstreams;
};

/* Owned by the job; the loop side may only clear cb (cancel). */
struct egress_lookup {
    const struct egress_resolver *r;
    char host[EGRESS_HOST_MAX + 1];
    egress_resolved_fn cb;
    void *data;
    int status;
    struct egress_addr addrs[EGRESS_RESOLVE_MAX_ADDRS];
    size_t n;
};

static int parse_hosts(struct egress_resolver *r, const char *path, struct sbx_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int rc = sbx_read_file(path, EGRESS_HOSTS_FILE_MAX, &text, &len);
    if (rc < 0)
        return sbx_err_sys(err, -rc, "reading SBX_EGRESS_HOSTS %s", path);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *fsave = NULL;
        char *addr = strtok_r(line, " \t\r", &fsave);
        if (!addr)
            continue;
        struct egress_addr a;
        struct in6_addr a6;
        struct in_addr a4;
        if (inet_pton(AF_INET, addr, &a4) == 1) {
            a = (struct egress_addr){.family = AF_INET};
            memcpy(a.b, &a4, 4);
        } else if (inet_pton(AF_INET6, addr, &a6) == 1) {
            a = (struct egress_addr){.family = AF_INET6};
            memcpy(a.b, &a6, 16);
        } else {
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_EGRESS_HOSTS: %.64s is not an address", addr);
        }
        for (char *name = strtok_r(NULL, " \t\r", &fsave); name;
             name = strtok_r(NULL, " \t\r", &fsave)) {
            r->hosts = sbx_xrealloc(r->hosts, (r->nhosts + 1) * sizeof(*r->hosts));
            struct hosts_entry *h = &r->hosts[r->nhosts];
            if (egress_host_normalise(name, strlen(name), h->name, err) < 0)
                return sbx_err_wrap(err, "SBX_EGRESS_HOSTS");
            h->addr = a;
            r->nhosts++;
        }
    }
    r->use_hosts = true;
    return 0;
}

static int parse_upstreams(struct egress_resolver *r, const char *list, struct sbx_err *err)
{
    _cleanup_free_ char *copy = sbx_xstrdup(list);
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(item, ':');
        if (!colon || r->nupstreams == EGRESS_TEST_UPSTREAMS_MAX)
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_EGRESS_TEST_UPSTREAMS: ADDR:PORT,... (at most %d)",
                               EGRESS_TEST_UPSTREAMS_MAX);
        *colon = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        struct test_upstream *u = &r->upstreams[r->nupstreams];
        struct in6_addr a6;
        struct in_addr a4;
        char *host = item;
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
            host[hl - 1] = '\0';
            host++;
        }
        if (inet_pton(AF_INET, host, &a4) == 1) {
            u->addr = (struct egress_addr){.family = AF_INET};
            memcpy(u->addr.b, &a4, 4);
        } else if (inet_pton(AF_INET6, host, &a6) == 1) {
            u->addr = (struct egress_addr){.family = AF_INET6};
            memcpy(u->addr.b, &a6, 16);
        } else {
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_EGRESS_TEST_UPSTREAMS: %.64s is not an address", host);
        }
        if (*end || port < 1 || port > 65535)
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_EGRESS_TEST_UPSTREAMS: bad port in %.64s", item);
        u->port = (unsigned)port;
        r->nupstreams++;
    }
    return 0;
}

static void load_self(struct egress_resolver *r)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return; /* the address classes still cover loopback and the private ranges */
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        struct egress_addr a;
        if (!i->ifa_addr || egress_addr_from_sockaddr(i->ifa_addr, &a) < 0)
            continue;
        r->self = sbx_xrealloc(r->self, (r->nself + 1) * sizeof(*r->self));
        r->self[r->nself++] = a;
    }
    freeifaddrs(ifs);
}

int egress_resolver_new(struct loop *l, const char *hosts_file, const char *test_upstreams,
                        struct egress_resolver **out, struct sbx_err *err)
{
    struct egress_resolver *r = sbx_xcalloc(1, sizeof(*r));
    int rc = 0;
    if (hosts_file && *hosts_file)
        rc = parse_hosts(r, hosts_file, err);
    if (rc == 0 && test_upstreams && *test_upstreams)
        rc = parse_upstreams(r, test_upstreams, err);
    if (rc == 0)
        rc = jobs_new(l, &r->jobs, err);
    if (rc < 0) {
        egress_resolver_free(r);
        return rc;
    }
    load_self(r);
    *out = r;
    return 0;
}

void egress_resolver_free(struct egress_resolver *r)
{
    if (!r)
        return;
    jobs_free(r->jobs);
    free(r->hosts);
    free(r->self);
    free(r);
}

static void add_addr(struct egress_lookup *q, const struct egress_addr *a)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->addrs[i].family == a->family && !memcmp(q->addrs[i].b, a->b, 16))
            return;
    if (q->n < EGRESS_RESOLVE_MAX_ADDRS)
        q->addrs[q->n++] = *a;
}

/* On a worker thread: reads only what the resolver fixed at creation. */
static void lookup_run(void *data)
{
    struct egress_lookup *q = data;
    if (q->r->use_hosts) {
        for (size_t i = 0; i < q->r->nhosts; i++)
            if (!strcmp(q->r->hosts[i].name, q->host))
                add_addr(q, &q->r->hosts[i].addr);
        q->status = q->n ? 0 : -ENOENT;
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(q->host, NULL, &hints, &res);
    if (rc != 0) {
        q->status = rc == EAI_NONAME || rc == EAI_NODATA ? -ENOENT : -EAGAIN;
        return;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        struct egress_addr a;
        if (egress_addr_from_sockaddr(ai->ai_addr, &a) == 0)
            add_addr(q, &a);
    }
    freeaddrinfo(res);
    q->status = q->n ? 0 : -ENOENT;
}

static void lookup_done(void *data, bool ran)
{
    struct egress_lookup *q = data;
    if (q->cb)
        q->cb(q->data, ran ? q->status : -ECANCELED, q->addrs, ran ? q->n : 0);
    free(q);
}

struct egress_lookup *egress_resolve(struct egress_resolver *r, const char *host,
                                     egress_resolved_fn cb, void *data)
{
    struct egress_lookup *q = sbx_xcalloc(1, sizeof(*q));
    q->r = r;
    snprintf(q->host, sizeof(q->host), "%s", host);
    q->cb = cb;
    q->data = data;
    jobs_submit(r->jobs, lookup_run, lookup_done, q);
    return q;
}

void egress_lookup_cancel(struct egress_lookup *q)
{
    if (q)
        q->cb = NULL;
}

const char *egress_resolver_addr_check(const struct egress_resolver *r,
                                       const struct egress_addr *addr, unsigned port)
{
    return egress_resolver_addr_check_private(r, addr, port, false);
}

const char *egress_resolver_addr_check_private(const struct egress_resolver *r,
                                               const struct egress_addr *addr, unsigned port,
                                               bool allow_private)
{
    for (size_t i = 0; i < r->nupstreams; i++)
        if (r->upstreams[i].port == port && egress_addr_equal(&r->upstreams[i].addr, addr))
            return NULL;
    const char *why = egress_addr_class(addr);
    if (why && !(allow_private && !strcmp(why, "private")))
        return why;
    for (size_t i = 0; i < r->nself; i++)
        if (egress_addr_equal(&r->self[i], addr))
            return "daemon_address";
    return NULL;
}
