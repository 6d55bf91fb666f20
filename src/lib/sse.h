/* An incremental parser for the text/event-stream format (the WHATWG "server-sent
 * events" rules): bytes go in as they arrive, in any pieces; each complete event's data
 * (its `data:` lines joined by "\n") comes out through a callback. Only `data` matters to
 * the sbx API; `event`, `id`, `retry` and comments are read and ignored. */
#ifndef SBX_LIB_SSE_H
#define SBX_LIB_SSE_H

#include <stddef.h>

/* One event's data may not grow past this; a longer one is an error, not a bigger buffer. */
#define SSE_EVENT_MAX (16 * 1024 * 1024)

/* data is NUL-terminated (len excludes the NUL). A non-zero return stops the parser
 * and is returned by sse_feed. */
typedef int (*sse_event_fn)(void *ud, const char *data, size_t len);

struct sse_parser {
    char *line; /* the current, unfinished line */
    size_t line_len, line_cap;
    char *data; /* the current event's data so far */
    size_t data_len, data_cap;
    int has_data;
    int skip_lf; /* the last byte was a CR: a following LF ends nothing more */
    sse_event_fn fn;
    void *ud;
};

void sse_init(struct sse_parser *p, sse_event_fn fn, void *ud);
void sse_release(struct sse_parser *p);
/* Returns 0, the callback's non-zero value, or -EMSGSIZE past SSE_EVENT_MAX. */
int sse_feed(struct sse_parser *p, const char *buf, size_t len);

#endif
