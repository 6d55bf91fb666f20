/* libFuzzer target for WebSocket connections (src/daemon/http/ws.c): wslay's framing as
 * our glue drives it, with our message bound, over a real socket and event loop.
 *
 * Input: everything a client sends after the upgrade, handed to ws_start as the bytes
 * already read (as MHD hands them over), then the end of the stream. Each complete text
 * or binary message is echoed back (so sends happen inside receives, as the terminal and
 * agent bridges do) and one starting with "bye" makes the server close. Invariants: a
 * message is at most WS_MSG_MAX bytes and at most what was sent, all messages together no
 * more than the input; the connection always ends, with on_closed exactly once; nothing
 * leaks (ASan's leak check).
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/common/loop.h"
#include "../../src/daemon/http/ws.h"
#include "fuzz.h"

struct run {
    struct loop *loop;
    size_t input, received;
    int closed;
};

static void on_message(struct ws *w, bool text, const uint8_t *buf, size_t len, void *data)
{
    struct run *r = data;
    REQUIRE(len <= WS_MSG_MAX && len <= r->input);
    r->received += len;
    REQUIRE(r->received <= r->input);
    if (len >= 3 && !memcmp(buf, "bye", 3))
        ws_close(w, WS_CLOSE_NORMAL, "bye");
    else
        (void)ws_send(w, text, buf, len);
}

static void on_closed(struct ws *w, void *data)
{
    struct run *r = data;
    r->closed++;
    loop_stop(r->loop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct ws_ops ops = {.on_message = on_message, .on_closed = on_closed};
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    /* The client has said everything: after the input, our reads see the end. Its side
     * stays open so what we answer has somewhere to go. */
    REQUIRE(shutdown(sv[1], SHUT_WR) == 0);
    struct run r = {.input = size};
    REQUIRE(loop_new(&r.loop) == 0);
    (void)ws_start(r.loop, NULL, sv[0], (const char *)data, size, &ops, &r);
    REQUIRE(loop_run(r.loop) == 0);
    REQUIRE(r.closed == 1);
    loop_free(r.loop);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
