#include "fetch.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../egress/proxy.h"

struct fetch {
    struct jobs *jobs;
    struct egress_check *check; /* while the address is being resolved */
    char *url;
    char *ca_file;
    char host[EGRESS_HOST_MAX + 1];
    char resolve[EGRESS_HOST_MAX + 64]; /* "host:443:address" for CURLOPT_RESOLVE */
    char addr[INET6_ADDRSTRLEN];        /* the address dialled, "" until resolved */
    size_t max_bytes;
    long long timeout_ms;
    long long t0_ms;
    fetch_done_fn cb;
    void *arg;
    bool cancelled;
    bool in_job;
    /* Filled on the worker thread, read on the loop once the job is done. */
    unsigned char *data;
    size_t len;
    bool too_large;
    char error[CURL_ERROR_SIZE];
};

static void fetch_free(struct fetch *f)
{
    free(f->url);
    free(f->ca_file);
    free(f->data);
    free(f);
}

static size_t on_body(char *ptr, size_t size, size_t n, void *userdata)
{
    struct fetch *f = userdata;
    size_t add = size * n;
    if (add > f->max_bytes - f->len) {
        f->too_large = true;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR */
    }
    f->data = sbx_xrealloc(f->data, f->len + add);
    memcpy(f->data + f->len, ptr, add);
    f->len += add;
    return add;
}

/* On a worker thread: only this fetch's own fields are touched. */
static void fetch_run(void *data)
{
    struct fetch *f = data;
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(f->error, sizeof(f->error), "libcurl could not start");
        return;
    }
    struct curl_slist *resolve = curl_slist_append(NULL, f->resolve);
    curl_easy_setopt(h, CURLOPT_URL, f->url);
    curl_easy_setopt(h, CURLOPT_RESOLVE, resolve);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never the environment's proxy */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)f->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->max_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, f->error);
    if (f->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, f->ca_file);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_FILESIZE_EXCEEDED)
        f->too_large = true;
    if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(f->error, sizeof(f->error), "no answer within %lld ms", f->timeout_ms);
    if (rc != CURLE_OK && !f->error[0])
        snprintf(f->error, sizeof(f->error), "%s", curl_easy_strerror(rc));
    if (rc == CURLE_OK)
        f->error[0] = '\0';
    curl_easy_cleanup(h);
    curl_slist_free_all(resolve);
}

static void fetch_done(void *data, bool ran)
{
    struct fetch *f = data;
    if (f->cancelled) {
        fetch_free(f);
        return;
    }
    struct sbx_err err = {0};
    if (!ran)
        sbx_err_set(&err, ECANCELED, "input_fetch_failed", "sbxd is stopping");
    else if (f->too_large)
        sbx_err_set(&err, EFBIG, "input_too_large", "%s is larger than the %zu bytes left",
                    f->url, f->max_bytes);
    else if (f->error[0])
        sbx_err_set(&err, EIO, "input_fetch_failed", "fetching %s: %s", f->url, f->error);
    struct fetch_info info = {f->host, f->addr, sbx_now_ms() - f->t0_ms};
    if (err.code[0]) {
        f->cb(NULL, 0, &info, &err, f->arg);
    } else {
        unsigned char *d = TAKE_PTR(f->data);
        f->cb(d, f->len, &info, NULL, f->arg);
    }
    fetch_free(f);
}

static void on_checked(void *data, int status, const struct egress_addr *addr,
                       const struct sbx_err *err)
{
    struct fetch *f = data;
    f->check = NULL;
    if (status < 0) {
        struct fetch_info info = {f->host, "", sbx_now_ms() - f->t0_ms};
        f->cb(NULL, 0, &info, err, f->arg);
        fetch_free(f);
        return;
    }
    inet_ntop(addr->family, addr->b, f->addr, sizeof(f->addr));
    snprintf(f->resolve, sizeof(f->resolve), addr->family == AF_INET6 ? "%s:443:[%s]" : "%s:443:%s",
             f->host, f->addr);
    f->in_job = true;
    jobs_submit(f->jobs, fetch_run, fetch_done, f);
}

struct fetch *fetch_start(struct egress_proxy *px, struct jobs *jobs, const char *url,
                          const char *ca_file, size_t max_bytes, long long timeout_ms,
                          fetch_done_fn cb, void *arg, struct sbx_err *err)
{
    struct fetch *f = sbx_xcalloc(1, sizeof(*f));
    if (egress_proxy_check_url(px, url, f->host, err) < 0) {
        free(f);
        return NULL;
    }
    f->max_bytes = max_bytes;
    f->timeout_ms = timeout_ms;
    f->t0_ms = sbx_now_ms();
    f->jobs = jobs;
    f->url = sbx_xstrdup(url);
    f->ca_file = ca_file && *ca_file ? sbx_xstrdup(ca_file) : NULL;
    f->cb = cb;
    f->arg = arg;
    f->check = egress_proxy_resolve_checked(px, f->host, 443, on_checked, f);
    return f;
}

void fetch_cancel(struct fetch *f)
{
    if (!f)
        return;
    if (f->check) {
        egress_check_cancel(f->check);
        fetch_free(f);
        return;
    }
    /* On a worker: fetch_done frees it without calling back. */
    f->cancelled = true;
}
