/* IP addresses as the egress rules see them: every spelling of a literal (inet_aton's
 * 127.1, 2130706433, 0x7f000001, 0177.0.0.1; IPv6 with or without brackets, ::ffff:
 * mapped), the classes that are never dialled (loopback, private, link-local, CGNAT,
 * multicast, metadata, reserved...) and IPv4 CIDR blocks for the operator's rules. */
#ifndef SBX_EGRESS_ADDR_H
#define SBX_EGRESS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* "[ffff:...:255.255.255.255]" plus NUL */
#define EGRESS_ADDR_STR_MAX 48

struct egress_addr {
    int family;    /* AF_INET or AF_INET6 */
    uint8_t b[16]; /* network order; IPv4 in b[0..3] */
};

/* 0 when host (NUL-terminated) is an IP literal in any spelling, else -EINVAL. */
int egress_addr_parse_literal(const char *host, struct egress_addr *out);
/* From a sockaddr_in/sockaddr_in6; -EAFNOSUPPORT for anything else. */
int egress_addr_from_sockaddr(const struct sockaddr *sa, struct egress_addr *out);
/* IPv6 forms that carry an IPv4 address (::ffff:a.b.c.d, 64:ff9b::a.b.c.d, 2002:AABB:CCDD::)
 * become that IPv4 address; anything else is copied. */
void egress_addr_unmap(const struct egress_addr *in, struct egress_addr *out);
/* Why the address may never be dialled ("loopback", "private", "link_local", "metadata",
 * "cgnat", "multicast", "unspecified", "reserved", "documentation", "benchmark"), or
 * NULL for a public address. Embedded IPv4 addresses are judged as IPv4. */
const char *egress_addr_class(const struct egress_addr *a);
bool egress_addr_equal(const struct egress_addr *a, const struct egress_addr *b);
void egress_addr_format(const struct egress_addr *a, char out[EGRESS_ADDR_STR_MAX]);

/* An IPv4 block: "a.b.c.d" (a /32) or "a.b.c.d/n", strict dotted quads only. */
struct egress_cidr {
    uint32_t net; /* host order, masked */
    unsigned prefix;
};
int egress_cidr_parse(const char *s, struct egress_cidr *out);
/* IPv4 (also an unmapped IPv6 carrying one) inside the block. */
bool egress_cidr_match(const struct egress_cidr *c, const struct egress_addr *a);

#endif
