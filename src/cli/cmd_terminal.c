/* `terminal`: a raw-mode TTY on a shell in the sandbox, over the WebSocket terminal
 * (docs/terminals.md): binary messages carry the bytes both ways, text messages JSON
 * control (ready, exited, error; resize from us on SIGWINCH). Ctrl-] detaches: the shell
 * keeps running for its grace period and `--attach PTY_ID` comes back to it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"

#define DETACH_KEY 0x1d /* Ctrl-] */
#define TERM_PTY_ID_MAX 64
#define TERM_CLOSE_WAIT_MS 2000

static int winch_pipe[2] = {-1, -1};
static struct termios saved_tty;
static bool tty_raw;

static void on_winch(int sig)
{
    int saved = errno;
    (void)!write(winch_pipe[1], "w", 1);
    errno = saved;
}

static void restore_tty(void)
{
    if (tty_raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tty);
        tty_raw = false;
    }
}

static void term_size(int *cols, int *rows)
{
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
        *cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
        *rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
    }
}

struct session {
    char pty_id[TERM_PTY_ID_MAX];
    int exit_code; /* -1 until the shell exits */
    bool failed;
    bool reattachable; /* the server let go of a shell that still runs */
};

static void on_msg(void *ud, bool text, const uint8_t *buf, size_t len)
{
    struct session *s = ud;
    if (!text) {
        (void)sbx_write_all(STDOUT_FILENO, buf, len);
        return;
    }
    json_t *j = json_loadb((const char *)buf, len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && !strcmp(type, "ready")) {
        const char *id = json_string_value(json_object_get(j, "pty_id"));
        if (id)
            snprintf(s->pty_id, sizeof(s->pty_id), "%s", id);
    } else if (type && !strcmp(type, "exited")) {
        s->exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
    } else if (type && !strcmp(type, "error")) {
        /* Still in raw mode: lines end in \r\n. */
        const char *code = json_string_value(json_object_get(j, "code"));
        fprintf(stderr, "\r\nsbx: terminal: %s\r\n", code ? code : "error");
        /* Taken over by another connection or idle: the shell lives on, reattachable. */
        s->reattachable = code && (!strcmp(code, "DETACHED") || !strcmp(code, "IDLE_DISCONNECTED"));
        s->failed = code && strcmp(code, "BAD_MESSAGE") && strcmp(code, "DETACHED");
    }
    json_decref(j);
}

static int send_resize(struct sbx_ws *ws, struct sbx_err *err)
{
    int cols, rows;
    term_size(&cols, &rows);
    char msg[96];
    int n = snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"cols\":%d,\"rows\":%d}", cols, rows);
    return sbx_ws_send(ws, true, msg, (size_t)n, err);
}

/* Pump until want() is false, the connection closes or the deadline passes. */
static bool pump_while(struct sbx_ws *ws, struct session *s, bool (*want)(const struct sbx_ws *),
                       long long deadline)
{
    struct sbx_err err = {0};
    while (sbx_ws_pump(ws, on_msg, s, &err) == 1) {
        if (want && !want(ws))
            return true;
        long long left = deadline - sbx_now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = sbx_ws_fd(ws),
                           .events = POLLIN | (sbx_ws_want_write(ws) ? POLLOUT : 0)};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return false;
    }
    return false;
}

/* Detach cleanly: wslay sends a queued control frame before queued data, so the keys
 * typed before the detach key go out first; then our close, and (a little) wait for the
 * server's, so the socket does not go before the server has read what we sent. */
static void close_handshake(struct sbx_ws *ws, struct session *s)
{
    long long deadline = sbx_now_ms() + TERM_CLOSE_WAIT_MS;
    if (sbx_ws_want_write(ws) && !pump_while(ws, s, sbx_ws_want_write, deadline))
        return;
    sbx_ws_close(ws, 1000);
    pump_while(ws, s, NULL, deadline);
}

/* Pump the connection until the shell ends, the server closes, or the user detaches. */
static int session_loop(struct cli *cli, struct sbx_ws *ws, struct session *s, bool *detached)
{
    struct sbx_err err = {0};
    bool stdin_open = true;
    for (;;) {
        int r = sbx_ws_pump(ws, on_msg, s, &err);
        if (r < 0)
            return cli_fail(cli, &err);
        if (r == 0)
            return CLI_OK;
        struct pollfd p[3] = {
            {.fd = sbx_ws_fd(ws), .events = POLLIN | (sbx_ws_want_write(ws) ? POLLOUT : 0)},
            {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = winch_pipe[0], .events = POLLIN},
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            return cli_error("poll: %s", strerror(errno));
        }
        if (p[2].revents & POLLIN) {
            char drain[16];
            (void)!read(winch_pipe[0], drain, sizeof(drain));
            if (send_resize(ws, &err) < 0)
                return cli_fail(cli, &err);
        }
        if (p[1].revents & (POLLIN | POLLHUP)) {
            char buf[4096];
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n <= 0 && !(n < 0 && errno == EINTR)) {
                stdin_open = false;
                continue;
            }
            if (n < 0)
                continue;
            char *k = tty_raw ? memchr(buf, DETACH_KEY, (size_t)n) : NULL;
            size_t send = k ? (size_t)(k - buf) : (size_t)n;
            if (send && sbx_ws_send(ws, false, buf, send, &err) < 0)
                return cli_fail(cli, &err);
            if (k) {
                *detached = true;
                close_handshake(ws, s);
                return CLI_OK;
            }
        }
    }
}

static int cmd_terminal(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"attach", required_argument, NULL, 'a'},
                                             {"provision", no_argument, NULL, 'p'},
                                             {0}};
    const char *attach = NULL;
    bool provision = false; /* wake a paused or stopped sandbox first (spec 002) */
    int o;
    while ((o = cli_getopt(cli, argc, argv, "", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        if (o == 'p')
            provision = true;
        else
            attach = optarg;
    }
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    const char *id = argv[optind];
    json_t *t = NULL;
    _cleanup_free_ char *tpath = cli_sb_path(id, "/terminal-ticket");
    bool json = cli->json;
    cli->json = false; /* the ticket is a credential: never print it */
    int rc = cli_call(cli, "POST", tpath, NULL, &t);
    cli->json = json;
    if (rc != CLI_OK)
        return rc;
    _cleanup_free_ char *ticket = sbx_escape(json_string_value(json_object_get(t, "ticket")));
    json_decref(t);
    int cols, rows;
    term_size(&cols, &rows);
    _cleanup_free_ char *pty = attach ? sbx_escape(attach) : NULL;
    _cleanup_free_ char *suffix =
        sbx_xasprintf("/terminal?ticket=%s&cols=%d&rows=%d%s%s%s", ticket, cols, rows,
                      pty ? "&pty_id=" : "", pty ? pty : "", provision ? "&provision=1" : "");
    _cleanup_free_ char *path = cli_sb_path(id, suffix);
    struct sbx_ws *ws = NULL;
    struct sbx_err err = {0};
    if (sbx_ws_connect(cli_api(cli), path, &ws, &err) < 0)
        return cli_fail(cli, &err);

    if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        sbx_ws_free(ws);
        return cli_error("pipe: %s", strerror(errno));
    }
    struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, NULL);
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tty) == 0) {
        struct termios raw = saved_tty;
        cfmakeraw(&raw);
        /* TCSADRAIN, not TCSAFLUSH: keys typed before the connection was up still count. */
        tty_raw = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
        atexit(restore_tty);
    }
    struct session s = {.exit_code = -1};
    bool detached = false;
    rc = session_loop(cli, ws, &s, &detached);
    restore_tty();
    signal(SIGWINCH, SIG_DFL);
    close(winch_pipe[0]);
    close(winch_pipe[1]);
    sbx_ws_free(ws);
    if (detached || s.reattachable)
        fprintf(stderr,
                "\nsbx: detached; the shell keeps running. Reattach with:\n"
                "  sbx terminal %s --attach %s\n",
                id, s.pty_id);
    if (detached)
        return CLI_OK;
    if (rc != CLI_OK)
        return rc;
    if (s.exit_code >= 0)
        return s.exit_code;
    return s.failed ? CLI_API : CLI_OK;
}

static const struct cli_cmd cmds[] = {
    {"terminal", "ID [--attach PTY_ID] [--provision]", "an interactive shell in the sandbox",
     "      --attach PTY_ID  go back to a detached shell (its recent screen is replayed)\n"
     "      --provision      resume a paused sandbox (or restart a stopped one) first;\n"
     "                       without it such a sandbox answers SANDBOX_PAUSED / SANDBOX_STOPPED\n"
     "The terminal is in raw mode; the window size follows yours. Ctrl-] detaches: the\n"
     "shell keeps running for the server's grace period (5 minutes by default) and the\n"
     "command to reattach is printed. Exits with the shell's exit code.\n",
     cmd_terminal},
};

const struct cli_group cli_terminal_cmds = CLI_GROUP("Terminal", cmds);
