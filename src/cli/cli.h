/* The sbx command-line client: what the command files share. Each command group lives in
 * its own cmd_*.c with a table of commands; main.c lists the tables (add a group there). */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../lib/sbx.h"

/* Exit codes. exec and run exit with the command's own code instead of CLI_OK. */
enum {
    CLI_OK = 0,
    CLI_FAIL = 1,  /* a local failure: a file, a checksum, an interrupted transfer */
    CLI_USAGE = 2, /* bad usage: unknown command or option, missing argument */
    CLI_API = 3,   /* the API answered an error (code, message and request id on stderr) */
    CLI_CONN = 4,  /* the server could not be reached */
};

struct cli {
    bool json;              /* --json: print the API's JSON */
    struct sbx_client *api; /* set up on first use by cli_api() */
    const struct cli_cmd *cmd;
};

struct cli_cmd {
    const char *name;
    const char *args;    /* "ID -- CMD..." for the usage line */
    const char *summary; /* one line for `sbx help` */
    const char *help;    /* options and details for `sbx help CMD` */
    int (*run)(struct cli *cli, int argc, char **argv);
};

struct cli_group {
    const char *title;
    const struct cli_cmd *cmds;
    size_t n;
};
#define CLI_GROUP(title, a)                                                                        \
    {                                                                                              \
        title, a, sizeof(a) / sizeof((a)[0])                                                       \
    }

extern const struct cli_group cli_sandbox_cmds, cli_exec_cmds, cli_files_cmds, cli_code_cmds,
    cli_terminal_cmds, cli_admin_cmds, cli_volume_cmds, cli_template_cmds;

/* The client, from the config (SBX_URL, SBX_API_KEY, the config file); NULL after printing
 * why (then return CLI_FAIL). */
struct sbx_client *cli_api(struct cli *cli);
/* Print a usage error for the current command and return CLI_USAGE. */
int cli_usage(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print err (with the request id for API errors) and return the matching exit code. */
int cli_fail(struct cli *cli, const struct sbx_err *err);
/* Print a local failure ("sbx: ...") and return CLI_FAIL. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The JSON, indented, on stdout. */
void cli_print_json(json_t *j);
/* sbx_call then, on success, print the JSON when --json; returns an exit code and keeps
 * the answer in *out (may be NULL) for human output. */
int cli_call(struct cli *cli, const char *method, const char *path, json_t *body, json_t **out);
/* getopt_long over argv with --help handled; returns the option, -1 at the end, or '?'
 * after printing a usage error (the caller returns CLI_USAGE). */
int cli_getopt(struct cli *cli, int argc, char **argv, const char *shortopts, const void *longopts);
/* Exact positional count check: prints a usage error when wrong. */
bool cli_nargs(struct cli *cli, int argc, int min, int max);
void cli_help_cmd(const struct cli_cmd *cmd, FILE *f);
/* "/v1/sandboxes/ID" + suffix, the id escaped (free it). */
char *cli_sb_path(const char *id, const char *suffix);
/* A JSON field as text for a table cell: strings as they are, numbers and booleans
 * printed, missing or null as NULL ("-"). buf holds numbers. */
const char *cli_field(json_t *obj, const char *name, char *buf, size_t n);
/* An integer unix time field as a relative time ("5m ago"), or NULL. */
const char *cli_when(json_t *obj, const char *name, char *buf, size_t n);

/* A progress bar on stderr for transfers over CLI_PROGRESS_MIN bytes, only on a TTY. */
#define CLI_PROGRESS_MIN (4LL * 1024 * 1024)
struct cli_progress {
    const char *label;
    bool on; /* stderr is a terminal */
    bool shown;
    long long last_ms;
};
void cli_progress_init(struct cli_progress *p, const char *label);
int cli_progress_tick(void *ud, long long done, long long total);
void cli_progress_end(struct cli_progress *p);

/* Where cp's remote side is: a sandbox's workspace ("sandboxes") or a volume ("volumes"). */
struct cli_remote {
    const char *collection;
    const char *id;
};
/* `cp SRC DST` with ID:PATH on one side, ID naming one of collection's. */
int cli_copy(struct cli *cli, int argc, char **argv, const char *collection);

/* Download every artifact of sandbox id into dir (their paths below out/), checking each
 * one's SHA-256 against the listing; with --json the listing is printed when print_json.
 * Returns an exit code. */
int cli_download_artifacts(struct cli *cli, const char *id, const char *dir, bool print_json);
/* Is rel a plain relative path (no empty, "." or ".." component), safe below a dir? */
bool cli_safe_relpath(const char *rel);

/* Set by SIGINT where a command asks for it (cli_catch_sigint). */
extern volatile int cli_interrupted;
void cli_catch_sigint(bool on);

#endif
