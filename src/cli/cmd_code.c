/* `code`: the sandbox's persistent Python kernel, as a REPL on a terminal or one cell
 * from -c or stdin. Cells stream (run_code with SSE); ^C during a cell sends
 * kernel/interrupt, so the cell stops with KeyboardInterrupt and the state stays. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "fmt.h"

/* What a cell may be, as the API takes it (docs/kernel.md). */
#define CODE_CELL_MAX (128 * 1024)
#define CODE_INTERRUPT_RETRY_MS 250
/* A terminal line is at most 4 KiB in canonical mode; a longer read is taken in pieces. */
#define CODE_LINE_MAX 4096

struct cell {
    struct cli *cli;
    struct sbx_client *aux; /* for kernel/interrupt while the cell's stream is open */
    const char *id;
    bool raised;
    bool interrupt; /* ^C seen, the kernel not yet interrupted */
    long long interrupt_ms;
};

static void write_text(int fd, json_t *ev)
{
    json_t *data = json_object_get(ev, "data");
    const char *enc = json_string_value(json_object_get(ev, "encoding"));
    if (!json_is_string(data))
        return;
    if (enc && !strcmp(enc, "base64")) {
        fprintf(stderr, "[%zu bytes of binary output]\n", json_string_length(data));
        return;
    }
    (void)sbx_write_all(fd, json_string_value(data), json_string_length(data));
}

static int on_cell_event(void *ud, json_t *ev)
{
    struct cell *c = ud;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        return 0;
    if (!strcmp(type, "stdout")) {
        write_text(STDOUT_FILENO, ev);
    } else if (!strcmp(type, "stderr")) {
        write_text(STDERR_FILENO, ev);
    } else if (!strcmp(type, "output")) {
        const char *mime = json_string_value(json_object_get(ev, "mime"));
        if (mime && !strncmp(mime, "text/plain", 10)) {
            write_text(STDOUT_FILENO, ev);
            (void)sbx_write_all(STDOUT_FILENO, "\n", 1);
        } else {
            fprintf(stderr, "[%s output; see it with --json]\n", mime ? mime : "binary");
        }
    } else if (!strcmp(type, "result")) {
        const char *res = json_string_value(json_object_get(ev, "result"));
        if (res) {
            (void)sbx_write_all(STDOUT_FILENO, res, strlen(res));
            (void)sbx_write_all(STDOUT_FILENO, "\n", 1);
        }
        json_t *err = json_object_get(ev, "error");
        if (json_is_object(err)) {
            c->raised = true;
            const char *tb = json_string_value(json_object_get(err, "traceback"));
            if (tb && *tb)
                fputs(tb, stderr);
            else
                fprintf(stderr, "%s: %s\n", json_string_value(json_object_get(err, "name")),
                        json_string_value(json_object_get(err, "value")));
        }
        if (json_is_true(json_object_get(ev, "kernel_restarted")))
            fprintf(stderr, "sbx: the kernel was restarted; its state is gone\n");
        return 1;
    } else if (!strcmp(type, "error")) {
        c->raised = true;
        fprintf(stderr, "sbx: error %s: %s\n", json_string_value(json_object_get(ev, "code")),
                json_string_value(json_object_get(ev, "message")));
        return 1;
    }
    return 0;
}

/* ^C while a cell runs: ask the kernel to interrupt it and keep reading its stream. The
 * kernel ignores an interrupt that lands before the cell has started (interrupted:
 * false), so one that missed is sent again until it hits or the cell ends. */
static int cell_tick(void *ud, long long done, long long total)
{
    struct cell *c = ud;
    if (cli_interrupted) {
        cli_interrupted = 0;
        c->interrupt = true;
    }
    long long now = sbx_now_ms();
    if (!c->interrupt || now - c->interrupt_ms < CODE_INTERRUPT_RETRY_MS)
        return 0;
    c->interrupt_ms = now;
    _cleanup_free_ char *path = cli_sb_path(c->id, "/kernel/interrupt");
    struct sbx_err err = {0};
    json_t *ans = NULL;
    if (sbx_call(c->aux, "POST", path, NULL, &ans, &err) < 0) {
        fprintf(stderr, "sbx: interrupt: %s\n", err.msg);
        c->interrupt = false;
    } else if (json_is_true(json_object_get(ans, "interrupted"))) {
        c->interrupt = false;
    }
    json_decref(ans);
    return 0;
}

/* Run one cell; returns an exit code (CLI_FAIL when the cell raised). */
static int run_cell(struct cli *cli, struct cell *c, const char *code, size_t len)
{
    _cleanup_free_ char *path = cli_sb_path(c->id, "/run_code");
    json_t *body = json_pack("{s:s%}", "code", code, len);
    int rc;
    if (cli->json) {
        json_t *ans = NULL;
        rc = cli_call(cli, "POST", path, body, &ans);
        if (rc == CLI_OK && json_is_object(json_object_get(ans, "error")))
            rc = CLI_FAIL;
        json_decref(ans);
        json_decref(body);
        return rc;
    }
    c->raised = c->interrupt = false;
    struct sbx_stream_opts opts = {.on_event = on_cell_event, .on_tick = cell_tick, .ud = c};
    struct sbx_err err = {0};
    rc = sbx_stream(cli_api(cli), "POST", path, body, &opts, &err) < 0 ? cli_fail(cli, &err)
         : c->raised                                                   ? CLI_FAIL
                                                                       : CLI_OK;
    json_decref(body);
    return rc;
}

/* One line from the terminal (canonical mode gives a line per read): > 0 bytes, 0 at
 * the end of input, -EINTR when ^C came first. SIGINT is blocked except inside ppoll, so
 * a ^C between the prompt and the wait is not lost. */
static ssize_t read_line(char *buf, size_t n)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    ssize_t got = -EINTR;
    for (;;) {
        if (cli_interrupted)
            break;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (ppoll(&p, 1, NULL, &old) < 0) {
            if (errno == EINTR)
                continue;
            got = -errno;
            break;
        }
        got = read(STDIN_FILENO, buf, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            got = -errno;
        break;
    }
    cli_interrupted = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return got;
}

static int repl(struct cli *cli, struct cell *c)
{
    fprintf(stderr, "Python on %s's kernel; ^C interrupts a cell, ^D quits.\n", c->id);
    char line[CODE_LINE_MAX];
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int rc = CLI_OK;
    for (;;) {
        cli_interrupted = 0;
        fputs(len ? "... " : ">>> ", stdout);
        fflush(stdout);
        ssize_t n = read_line(line, sizeof(line));
        if (n == -EINTR) {
            fputs("\nKeyboardInterrupt\n", stdout);
            len = 0;
            continue;
        }
        if (n <= 0) {
            fputc('\n', stdout);
            break;
        }
        if (len + (size_t)n > CODE_CELL_MAX) {
            fprintf(stderr, "sbx: a cell may be at most %d bytes\n", CODE_CELL_MAX);
            len = 0;
            continue;
        }
        buf = sbx_xrealloc(buf, len + (size_t)n + 1);
        memcpy(buf + len, line, (size_t)n);
        len += (size_t)n;
        buf[len] = '\0';
        if (len == 1 && buf[0] == '\n') {
            len = 0;
            continue;
        }
        if (buf[len - 1] != '\n' || code_needs_more(buf))
            continue;
        rc = run_cell(cli, c, buf, len);
        len = 0;
        if (rc != CLI_OK && rc != CLI_FAIL)
            break; /* the server is gone or refuses: no point in a next prompt */
        rc = CLI_OK;
    }
    return rc;
}

static int cmd_code(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"command", required_argument, NULL, 'c'}, {"reset", no_argument, NULL, 'r'}, {0}};
    const char *code = NULL;
    bool reset = false;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "c:", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        if (o == 'c')
            code = optarg;
        else
            reset = true;
    }
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    struct cell c = {.cli = cli, .id = argv[optind]};
    struct sbx_client *api = cli_api(cli);
    if (!api)
        return CLI_FAIL;
    if (reset) {
        _cleanup_free_ char *path = cli_sb_path(c.id, "/kernel/reset");
        int rc = cli_call(cli, "POST", path, NULL, NULL);
        if (rc != CLI_OK || (!code && isatty(STDIN_FILENO) == 0))
            return rc;
    }
    c.aux = sbx_client_dup(api);
    cli_catch_sigint(true);
    int rc;
    if (code) {
        rc = run_cell(cli, &c, code, strlen(code));
    } else if (isatty(STDIN_FILENO)) {
        rc = repl(cli, &c);
    } else {
        _cleanup_free_ char *all = NULL;
        size_t len = 0;
        int r = sbx_read_file("/dev/stdin", CODE_CELL_MAX, &all, &len);
        rc = r < 0 ? cli_error("reading stdin: %s", strerror(-r)) : run_cell(cli, &c, all, len);
    }
    cli_catch_sigint(false);
    sbx_client_free(c.aux);
    return rc;
}

static const struct cli_cmd cmds[] = {
    {"code", "ID [-c CODE] [--reset]", "Python on the sandbox's persistent kernel",
     "  -c, --command CODE  run CODE as one cell and exit (1 when it raised)\n"
     "      --reset         restart the kernel first (its state is lost)\n"
     "On a terminal: a REPL (multi-line input as in Python; an empty line ends a block;\n"
     "^C interrupts the running cell and keeps the kernel's state; ^D quits).\n"
     "From a pipe: all of stdin is one cell.\n",
     cmd_code},
};

const struct cli_group cli_code_cmds = CLI_GROUP("Code", cmds);
