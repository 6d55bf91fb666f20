/* The proxy's state, shared by its parts (proxy.c: connections and their bytes;
 * decide.c: what a request may reach; url_check.c); not for anything outside
 * src/daemon/egress/. */
#ifndef SBX_EGRESS_PROXY_INTERNAL_H
#define SBX_EGRESS_PROXY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../http/reqhead.h"
#include "proxy.h"
#include "resolve.h"

struct mitm_ca;
struct mitm;
struct chan_stream;
struct sandbox;
struct loop_watch;
struct loop_timer;

enum conn_state {
    ST_HEAD,       /* reading the client's request head */
    ST_RESOLVING,  /* waiting for the resolver */
    ST_CONNECTING, /* non-blocking connect to a validated address */
    ST_SNI,        /* CONNECT answered 200: waiting for the ClientHello */
    ST_TUNNEL,     /* relaying both ways */
    ST_CLOSING,    /* refused or finished: waiting for the agent's EXIT */
};

struct egress_conn {
    struct egress_proxy *px;
    struct chan_stream *st;
    struct sandbox *sb;
    enum conn_state state;
    long long started_ms;
    long long log_id; /* 0 until logged */
    bool logged_final;

    /* The request head, parsed in place: headers point into head[]. */
    struct reqhead rh;
    uint8_t head[EGRESS_HEAD_MAX];
    struct reqhead_header headers[EGRESS_HEADERS_MAX];

    char method[16];
    bool is_connect;
    char host[EGRESS_HOST_MAX + 1];
    unsigned port;
    char *target; /* plain HTTP: the origin-form request target */

    struct egress_lookup *lookup;
    struct egress_addr addrs[EGRESS_RESOLVE_MAX_ADDRS];
    size_t naddrs, next_addr;
    char address[EGRESS_ADDR_STR_MAX];

    int ufd;
    struct loop_watch *uw;
    uint32_t uevents;
    struct loop_timer *timer;

    /* client -> upstream: bytes not yet written; the first `precredited` of them were
     * credited already (they came with the head). */
    uint8_t *up;
    size_t up_off, up_len, precredited;
    uint64_t up_window; /* what the agent may still send us on channel 1 */
    /* upstream -> client */
    uint64_t down_window;
    bool client_eof, upstream_eof, down_eof_sent, upstream_shut;
    long long bytes_up, bytes_down;

    char verdict[16];
    char reason[192];
    char audit_rule[72]; /* the configuration's audit rule that matched, for the log */
    /* An inject rule matched (docs/configs.md): TLS is ended here once the SNI passed. */
    const json_t *inject_rule; /* in the sandbox's network policy */
    json_t *inject_headers;    /* [{header, value}], the sandbox's copy */
    struct mitm *mitm;
    size_t credit_owed; /* client bytes taken in while the upstream queue was full */
    struct egress_conn *next;
};

struct egress_proxy {
    struct loop *loop;
    struct store *store;
    struct egress_resolver *resolver;
    struct egress_operator *op; /* NULL: no operator policy */
    struct mitm_ca *ca;         /* for configurations' inject rules (docs/configs.md) */
    struct egress_conn *conns;
};

/* proxy.c */
/* Answer the client with status and close (verdict and reason go to the log). */
void egress_conn_refuse(struct egress_conn *c, unsigned status, const char *verdict,
                        const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void egress_conn_stop_timer(struct egress_conn *c);
/* Dial the next validated address; refuse when none is left. */
void egress_conn_connect(struct egress_conn *c);

/* decide.c: the request head is in; policy, resolution and address checks, then
 * egress_conn_connect or a refusal. */
void egress_conn_decide(struct egress_conn *c);

#endif
