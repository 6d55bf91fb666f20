/* libcurl helpers shared by the runtime's HTTP clients (docker_api.c, provider_api.c):
 * a bounded answer body, an upload read from an fd, cleanup attributes. Library code. */
#ifndef SBX_RUNTIME_CURLX_H
#define SBX_RUNTIME_CURLX_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* An answer's body, kept up to max bytes (NUL-terminated); the rest is read and dropped
 * (over says so), so the status still counts. */
struct curlx_body {
    char *data;
    size_t len;
    size_t max;
    bool over;
};
/* CURLOPT_WRITEFUNCTION for a struct curlx_body. */
size_t curlx_body_cb(char *ptr, size_t size, size_t n, void *data);
/* CURLOPT_READFUNCTION reading the int fd data points to, until its end. */
size_t curlx_fd_read_cb(char *buf, size_t size, size_t n, void *data);

void curlx_cleanup(CURL **c);
void curlx_slist_cleanup(struct curl_slist **l);
#define _cleanup_curl_ __attribute__((cleanup(curlx_cleanup)))
#define _cleanup_slist_ __attribute__((cleanup(curlx_slist_cleanup)))

#endif
