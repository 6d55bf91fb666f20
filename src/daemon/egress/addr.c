#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int egress_addr_parse_literal(const char *host, struct egress_addr *out)
{
    size_t n = strlen(host);
    char buf[64];
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        if (n - 2 >= sizeof(buf))
            return -EINVAL;
        memcpy(buf, host + 1, n - 2);
        buf[n - 2] = '\0';
        host = buf;
    }
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        out->family = AF_INET6;
        memcpy(out->b, &a6, 16);
        return 0;
    }
    /* inet_aton, not inet_pton: it takes exactly the legacy forms (127.1, 2130706433,
     * 0x7f000001, 0177.0.0.1) that getaddrinfo and most clients accept too. */
    struct in_addr a4;
    if (inet_aton(host, &a4) == 1) {
        out->family = AF_INET;
        memset(out->b, 0, sizeof(out->b));
        memcpy(out->b, &a4, 4);
        return 0;
    }
    return -EINVAL;
}

int egress_addr_from_sockaddr(const struct sockaddr *sa, struct egress_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        out->family = AF_INET;
        memcpy(out->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        out->family = AF_INET6;
        memcpy(out->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -EAFNOSUPPORT;
}

static bool prefix6(const uint8_t *b, const uint8_t *p, unsigned bits)
{
    for (unsigned i = 0; i < bits / 8; i++)
        if (b[i] != p[i])
            return false;
    unsigned rem = bits % 8;
    return rem == 0 || ((b[bits / 8] ^ p[bits / 8]) & (uint8_t)(0xff << (8 - rem))) == 0;
}

static void set4(struct egress_addr *out, const uint8_t *v4)
{
    memset(out, 0, sizeof(*out));
    out->family = AF_INET;
    memcpy(out->b, v4, 4);
}

void egress_addr_unmap(const struct egress_addr *in, struct egress_addr *out)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    static const uint8_t six2four[2] = {0x20, 0x02};
    if (in->family == AF_INET6) {
        if (prefix6(in->b, mapped, 96) || prefix6(in->b, nat64, 96)) {
            set4(out, in->b + 12);
            return;
        }
        if (prefix6(in->b, six2four, 16)) {
            set4(out, in->b + 2);
            return;
        }
    }
    *out = *in;
}

static const char *class4(const uint8_t *b)
{
    uint32_t a = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    static const struct {
        uint32_t net;
        unsigned prefix;
        const char *what;
    } blocks[] = {
        {0xA9FEA9FEu, 32, "metadata"}, /* 169.254.169.254, before link-local */
        {0x00000000u, 8, "unspecified"},
        {0x0A000000u, 8, "private"},
        {0x64400000u, 10, "cgnat"},
        {0x7F000000u, 8, "loopback"},
        {0xA9FE0000u, 16, "link_local"},
        {0xAC100000u, 12, "private"},
        {0xC0000000u, 24, "reserved"},
        {0xC0000200u, 24, "documentation"},
        {0xC0586300u, 24, "reserved"},
        {0xC0A80000u, 16, "private"},
        {0xC6120000u, 15, "benchmark"},
        {0xC6336400u, 24, "documentation"},
        {0xCB007100u, 24, "documentation"},
        {0xE0000000u, 4, "multicast"},
        {0xF0000000u, 4, "reserved"}, /* and 255.255.255.255 */
    };
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
        uint32_t mask = blocks[i].prefix ? 0xffffffffu << (32 - blocks[i].prefix) : 0;
        if ((a & mask) == blocks[i].net)
            return blocks[i].what;
    }
    return NULL;
}

static const char *class6(const uint8_t *b)
{
    static const uint8_t zero[16] = {0};
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t aws_md[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
    static const struct {
        uint8_t p[16];
        unsigned bits;
        const char *what;
    } blocks[] = {
        {{0}, 96, "reserved"},                     /* ::/96, IPv4-compatible (deprecated) */
        {{0x00, 0x64, 0xff, 0x9b, 0, 1}, 48, "reserved"}, /* local-use NAT64 */
        {{0x01, 0x00}, 64, "reserved"},            /* discard */
        {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
        {{0x20, 0x01, 0x00, 0x10}, 28, "reserved"}, /* ORCHID */
        {{0x20, 0x01, 0x00, 0x00}, 32, "reserved"}, /* Teredo: carries a hidden IPv4 */
        {{0x20, 0x01, 0x00, 0x02, 0, 0}, 48, "benchmark"},
        {{0xfc}, 7, "private"},
        {{0xfe, 0x80}, 10, "link_local"},
        {{0xfe, 0xc0}, 10, "private"}, /* site-local (deprecated) */
        {{0xff}, 8, "multicast"},
    };
    if (!memcmp(b, zero, 16))
        return "unspecified";
    if (!memcmp(b, one, 16))
        return "loopback";
    if (!memcmp(b, aws_md, 16))
        return "metadata";
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
        if (prefix6(b, blocks[i].p, blocks[i].bits))
            return blocks[i].what;
    return NULL;
}

const char *egress_addr_class(const struct egress_addr *a)
{
    struct egress_addr u;
    egress_addr_unmap(a, &u);
    return u.family == AF_INET ? class4(u.b) : class6(u.b);
}

bool egress_addr_equal(const struct egress_addr *a, const struct egress_addr *b)
{
    struct egress_addr ua, ub;
    egress_addr_unmap(a, &ua);
    egress_addr_unmap(b, &ub);
    return ua.family == ub.family && !memcmp(ua.b, ub.b, ua.family == AF_INET ? 4 : 16);
}

void egress_addr_format(const struct egress_addr *a, char out[EGRESS_ADDR_STR_MAX])
{
    if (!inet_ntop(a->family, a->b, out, EGRESS_ADDR_STR_MAX))
        snprintf(out, EGRESS_ADDR_STR_MAX, "?");
}

int egress_cidr_parse(const char *s, struct egress_cidr *out)
{
    char buf[32];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    struct in_addr a;
    if (inet_pton(AF_INET, buf, &a) != 1)
        return -EINVAL;
    unsigned prefix = 32;
    if (slash) {
        const char *p = slash + 1;
        if (!*p || strlen(p) > 2)
            return -EINVAL;
        prefix = 0;
        for (; *p; p++) {
            if (*p < '0' || *p > '9')
                return -EINVAL;
            prefix = prefix * 10 + (unsigned)(*p - '0');
        }
        if (prefix > 32)
            return -EINVAL;
    }
    uint32_t mask = prefix ? 0xffffffffu << (32 - prefix) : 0;
    out->net = ntohl(a.s_addr) & mask;
    out->prefix = prefix;
    return 0;
}

bool egress_cidr_match(const struct egress_cidr *c, const struct egress_addr *a)
{
    struct egress_addr u;
    egress_addr_unmap(a, &u);
    if (u.family != AF_INET)
        return false;
    uint32_t v = (uint32_t)u.b[0] << 24 | (uint32_t)u.b[1] << 16 | (uint32_t)u.b[2] << 8 | u.b[3];
    uint32_t mask = c->prefix ? 0xffffffffu << (32 - c->prefix) : 0;
    return (v & mask) == c->net;
}
