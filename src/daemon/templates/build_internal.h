/* The builder's state and build records, shared by build.c (custom templates),
 * operator_build.c (the operator's templates), build_record.c (records and their events)
 * and template_delete.c only. */
#ifndef SBX_TEMPLATES_BUILD_INTERNAL_H
#define SBX_TEMPLATES_BUILD_INTERNAL_H

#include "../egress/policy.h"
#include "../exec/exec.h"
#include "../sandbox/template.h"
#include "build.h"
#include "recipe.h"
#include "tree.h"

struct operator_run;

struct template_builds {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct manager *mgr;
    struct jobs *jobs;
    struct egress_policy egress; /* SBX_TEMPLATE_REGISTRIES */
    struct template_build *list; /* newest first; one per name */
};

/* Where the build's inputs wait in the build sandbox's workspace (host-written before any
 * step runs; the workspace is not part of the tree). */
#define STEPS_MAX (RECIPE_RUN_MAX + 8)

enum tb_status { TB_BUILDING, TB_READY, TB_FAILED };

struct watcher {
    const struct template_watch_ops *ops;
    void *data;
};

struct step {
    char label[48]; /* "prepare", "boot", "apt", "npm", "files", "run 2/5", "ready", ... */
    enum {
        S_PREPARE,
        S_BOOT,
        S_APT,
        S_NPM,
        S_FILES,
        S_RUN,
        S_READY,
        S_FINISH,
        S_SEAL,
        S_SCRIPT, /* an operator build: scripts/build-template.sh NAME on the host */
        S_CHECK,  /* an operator build: the template it made is read back */
    } kind;
    size_t run_index;
};

struct line_buf {
    char buf[TEMPLATE_LOG_LINE_MAX];
    size_t len;
};

struct template_build {
    struct template_builds *b;
    char id[TEMPLATE_BUILD_ID_LEN + 1];
    char name[TEMPLATE_NAME_MAX + 1];
    char owner[TEMPLATE_OWNER_MAX + 1];
    bool shared;
    char digest[65];
    struct recipe recipe;
    json_t *parent; /* the parent template's manifest */
    char from_digest[TEMPLATE_DIGEST_MAX + 1];
    enum tb_status status;
    long long started_at, finished_at;
    long long t0_ms; /* monotonic, at the start */
    struct step steps[STEPS_MAX];
    size_t nsteps, cur;
    json_t *events;
    size_t log_bytes;
    bool log_truncated;
    struct watcher watchers[TEMPLATE_BUILD_WATCHERS_MAX];
    size_t nwatchers;
    char *tmp;    /* <cache>/.build-<name>-<digest>.XXXXXX */
    char *rootfs; /* tmp/rootfs */
    char sandbox_id[STORE_ID_MAX + 1];
    struct exec_run *run;
    struct line_buf lines[2];
    json_t *installed; /* dpkg's list, from the finish step */
    json_t *npm_list;
    json_t *error;    /* {step, code, message, exit_code?, log_tail?} once failed */
    json_t *manifest; /* once ready */
    json_t *inputs;   /* [{name, path}] copied into the inputs dir at boot, or NULL */
    /* The seal job's outcome. */
    char why[TREE_ERR_MAX];
    int job_r;
    struct operator_run *op; /* an operator build's script while it runs (operator_build.c) */
    struct template_build *next;
};

/* rm -rf path on a worker thread (a failed build's tree, a deleted template's). */
void build_remove_later(struct template_builds *b, const char *path);

/* --- records and events (build_record.c) --- */
/* Send ev (a new reference, taken) to every watcher and keep it for late ones. */
void build_emit(struct template_build *tb, json_t *ev);
/* The watchers' on_end, once the build ended. */
void build_end_watchers(struct template_build *tb);
int build_percent(const struct template_build *tb);
/* s[0..n) as a JSON string, cut at the last whole UTF-8 character. */
json_t *build_text_json(const char *s, size_t n);
/* Output of the current step: split into log events per line (ch 0 stdout, 1 stderr). */
void build_output(struct template_build *tb, unsigned ch, const uint8_t *buf, size_t len);
/* The partial lines left, as log events. */
void build_flush_lines(struct template_build *tb);
/* The step event of the current step. */
void build_step_event(struct template_build *tb);
void build_free(struct template_build *tb);
size_t build_running(const struct template_builds *b);
struct template_build *build_by_name(struct template_builds *b, const char *name);
/* Keep tb as its name's last build (the oldest finished records go past the maximum). */
void build_remember(struct template_builds *b, struct template_build *tb);

/* --- operator builds (operator_build.c) --- */
/* The daemon stops: the script is stopped and its watches go. */
void operator_run_abandon(struct operator_run *op);

#endif
