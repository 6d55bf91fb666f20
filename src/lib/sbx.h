/* libsbx: a small client library for the sbx API (HTTP via libcurl, JSON via jansson,
 * server-sent events, WebSocket terminals via wslay). Errors follow the daemon's
 * convention: functions return 0 or a negative errno and fill a struct sbx_err whose
 * code is the API's error code. Library code never prints and never exits.
 *
 * Error kinds, from err->errnum:
 *   SBX_E_API   the server answered an error; code/message are the API's, and
 *               sbx_client_request_id() names the request;
 *   SBX_E_CONN  the server could not be reached (code "connection_failed");
 *   anything else: a local failure (a file, a bad argument, memory). */
#ifndef SBX_LIB_SBX_H
#define SBX_LIB_SBX_H

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define SBX_E_API EREMOTEIO
#define SBX_E_CONN ECONNREFUSED

/* An error answer's body is read up to this size; the rest is dropped. */
#define SBX_ERROR_BODY_MAX (64 * 1024)
/* JSON answers are buffered whole: a bigger one is refused rather than grown without end. */
#define SBX_JSON_BODY_MAX (64 * 1024 * 1024)
#define SBX_REQUEST_ID_MAX 96

struct sbx_client;

/* url: the API base ("http://127.0.0.1:8787"); key may be NULL (public routes only). */
struct sbx_client *sbx_client_new(const char *url, const char *key);
void sbx_client_free(struct sbx_client *c);
/* A second client on the same server with the same key (a call while another streams). */
struct sbx_client *sbx_client_dup(const struct sbx_client *c);
/* The x-request-id of the last answer ("" when there was none). */
const char *sbx_client_request_id(const struct sbx_client *c);
/* The HTTP status of the last answer (0 when none arrived). */
long sbx_client_status(const struct sbx_client *c);

/* A request with an optional JSON body (borrowed). A 2xx answer's JSON goes to *out
 * (NULL when out is NULL or the body is empty); anything else fills err. */
int sbx_call(struct sbx_client *c, const char *method, const char *path, json_t *body, json_t **out,
             struct sbx_err *err);

/* Called every so often while a transfer runs, and with the bytes moved. A non-zero
 * return stops the transfer (the call then fails with code "cancelled"). */
typedef int (*sbx_tick_fn)(void *ud, long long done, long long total);

/* Server-sent events: each `data:` frame's JSON object, in order. fn returns non-zero to
 * stop reading (the call then returns 0). An answer that is not a stream (an error before
 * the stream starts) fills err as sbx_call does. */
typedef int (*sbx_event_fn)(void *ud, json_t *event);
struct sbx_stream_opts {
    sbx_event_fn on_event;
    sbx_tick_fn on_tick; /* may be NULL */
    void *ud;
};
int sbx_stream(struct sbx_client *c, const char *method, const char *path, json_t *body,
               const struct sbx_stream_opts *opts, struct sbx_err *err);

/* PUT the size bytes of fd to path, streamed. *out gets the JSON answer when out is set. */
int sbx_upload_fd(struct sbx_client *c, const char *path, int fd, long long size,
                  sbx_tick_fn on_tick, void *ud, json_t **out, struct sbx_err *err);
/* GET path (or an absolute http(s) URL, sent without the key: signed links) into fd,
 * streamed. When sha256_hex is set (65 bytes) it receives the hex digest of the bytes. */
int sbx_download_fd(struct sbx_client *c, const char *path_or_url, int fd, sbx_tick_fn on_tick,
                    void *ud, char *sha256_hex, struct sbx_err *err);

/* "a b/c%" -> "a%20b/c%25": each path component escaped, the slashes kept. */
char *sbx_escape_path(const char *path);
/* One query or path component, fully escaped. */
char *sbx_escape(const char *s);

/* --- WebSocket (RFC 6455, framing by wslay) ------------------------------------------- */

struct sbx_ws;
/* A message: text (true) or binary; the buffer is valid during the call only. */
typedef void (*sbx_ws_msg_fn)(void *ud, bool text, const uint8_t *buf, size_t len);

/* Connect to path (with its query) on the client's server and complete the handshake.
 * A refusal before the upgrade fills err with the answer's API error. */
int sbx_ws_connect(struct sbx_client *c, const char *path, struct sbx_ws **out,
                   struct sbx_err *err);
void sbx_ws_free(struct sbx_ws *ws);
/* The socket to poll: POLLIN always, POLLOUT when sbx_ws_want_write(). */
int sbx_ws_fd(const struct sbx_ws *ws);
bool sbx_ws_want_write(const struct sbx_ws *ws);
/* Queue a message; it goes out from sbx_ws_pump. */
int sbx_ws_send(struct sbx_ws *ws, bool text, const void *buf, size_t len, struct sbx_err *err);
int sbx_ws_close(struct sbx_ws *ws, uint16_t status);
/* Read what has arrived (messages to fn) and write what is queued, without blocking.
 * Returns 1 while open, 0 once the connection is closed, or a negative errno. */
int sbx_ws_pump(struct sbx_ws *ws, sbx_ws_msg_fn fn, void *ud, struct sbx_err *err);

#endif
