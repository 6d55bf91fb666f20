/* A Docker Engine HTTP API client (libcurl) over the engine's unix socket, or over TCP with
 * TLS client certificates (a remote engine): the requests the docker backend makes
 * (docs/runtime.md "Docker"). Shared by sbxd (probe, inventory, image import) and sbx-shim
 * (create, attach, copy, kill, remove). Library code: never logs, never exits. */
#ifndef SBX_RUNTIME_DOCKER_API_H
#define SBX_RUNTIME_DOCKER_API_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* Engine API version every request names: Docker 20.10 and later speak it. */
#define DOCKER_API_PREFIX "/v1.41"
/* The most of an answer's body kept (errors, inspect, create). */
#define DOCKER_RESP_MAX (256u * 1024u)
/* Container names: "sbx-<sandbox id>". */
#define DOCKER_NAME_PREFIX "sbx-"
/* Each engine request's bound unless the configuration's http_timeout_sec says otherwise. */
#define DOCKER_TIMEOUT_DEFAULT_MS 30000L
/* In a docker sandbox's state dir: the engine's options for its holder (rt_start writes
 * it, sbx-shim reads it): {"timeout_ms": N, "host": "tcp://...", "tls_dir": "..."}, the
 * last two only for a remote engine. */
#define DOCKER_ENGINE_FILE "docker-engine.json"
/* The label every sbx container carries: the sandbox's id (the inventory's filter). */
#define DOCKER_LABEL_ID "sbx.id"
/* ... and, made from a configuration, that configuration's id (its inventory's check). */
#define DOCKER_LABEL_CONFIG "sbx.config"

/* An engine: where it listens and how to prove who we are. Strings are borrowed. */
struct docker_engine {
    const char *host;    /* a unix socket's path, or "tcp://HOST:PORT" (a remote engine) */
    const char *tls_dir; /* for tcp: ca.pem, cert.pem, key.pem (Docker's layout); NULL: none */
};
/* The files of a TLS directory, as Docker names them. */
#define DOCKER_TLS_CA "ca.pem"
#define DOCKER_TLS_CERT "cert.pem"
#define DOCKER_TLS_KEY "key.pem"
#define DOCKER_TCP_PREFIX "tcp://"

/* Is host a remote engine's address (tcp://) rather than a local socket's path? */
bool docker_host_remote(const char *host);

/* One request to the engine e: method on path (below DOCKER_API_PREFIX), with a
 * JSON body or none. *status is the HTTP status; *resp (may be NULL) the body, at most
 * DOCKER_RESP_MAX. A transport failure is an error: docker_tls_error when the TLS
 * handshake failed (a certificate refused either way), docker_unreachable otherwise; any
 * status is not: the caller judges it. */
int docker_call(const struct docker_engine *e, long timeout_ms, const char *method, const char *path,
                const char *body, long *status, char **resp, struct sbx_err *err);

/* method (POST, PUT) on path with the body read from fd until EOF (an image import's or
 * an archive copy's tar stream), typed application/x-tar. Status and answer as for
 * docker_call. */
int docker_upload(const struct docker_engine *e, long timeout_ms, const char *method,
                  const char *path, int fd, long *status, char **resp, struct sbx_err *err);

/* The engine's message in an error answer ({"message":...}), or the raw text's first
 * line: rewritten in place in resp, which it returns ("" for NULL). */
const char *docker_message(char *resp);

/* A hijacked connection to the engine: after docker_hijack the socket carries the raw
 * stream of the request (an attach's multiplexed stdio). */
struct docker_stream;
/* POST path with "Upgrade: tcp"; succeeds on 101 or 200 and hands over the connection.
 * timeout_ms bounds each wait for the engine until then. */
int docker_hijack(const struct docker_engine *e, long timeout_ms, const char *path,
                  struct docker_stream **out, struct sbx_err *err);
/* The socket to poll. */
int docker_stream_fd(const struct docker_stream *s);
/* Like read(2)/write(2) on the non-blocking socket: bytes, 0 at EOF (recv), -EAGAIN. */
long docker_stream_recv(struct docker_stream *s, void *buf, size_t len);
long docker_stream_send(struct docker_stream *s, const void *buf, size_t len);
void docker_stream_free(struct docker_stream *s);

#endif
