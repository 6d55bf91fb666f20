/* The daemon's context, handed to every route handler. */
#ifndef SBX_SBXD_H
#define SBX_SBXD_H

#include "../common/loop.h"
#include "config.h"
#include "http/router.h"
#include "http/server.h"
#include "live/llm.h"
#include "sandbox/manager.h"
#include "store/store.h"

struct sbxd {
    struct sbxd_config cfg;
    struct loop *loop;
    struct store *store;
    struct manager *mgr;
    struct http_server *http;
    struct router router; /* every feature's routes (routes.c) */
    struct jobs *jobs;    /* worker threads (artifact hashing and scanning) */
    struct artifacts *artifacts;
    struct llm *llm; /* NULL unless the operator configured SBX_LLM_URL */
    struct egress_proxy *egress;
    struct terminals *terminals; /* tickets and connected WebSocket terminals */
    struct previews *previews;   /* the preview listener and its links (preview.c) */
    struct skills *skills;       /* the skill catalog (skills/catalog.c) */
    struct billing *billing;     /* metering, limits, settlement (billing/) */
    struct metrics_listener *metrics; /* SBX_METRICS_LISTEN, or NULL */
    struct mcp *mcp;             /* MCP sessions and calls in flight (mcp/mcp.c) */
    struct configs *configs;     /* sandbox configurations, personal variables (configs/) */
    struct warm_pool *pool;      /* warm pools of ready sandboxes (templates/pool.c) */
    struct installs *installs;   /* skills installed into configurations (skills/installs.c) */
    struct retention *retention; /* pruning by age and the audit anchor (audit/retention.c) */
    struct template_builds *builds; /* custom template builds (templates/build.c) */
    struct e2b_templates *e2b_templates; /* E2B's template builds (e2b/e2b_templates.c) */
    struct audit_windows *input_windows; /* binary stdin's coalesced audit (audit/input_window.c) */
    struct cluster *cluster;        /* this node among the store's (cluster/) */
    struct volumes *volumes;        /* named storage shared by sandboxes (volumes/) */
    /* A key was deleted (keys/keys_api.c): main's hook ends what it opened (terminals,
     * PTY sessions, streams). NULL: nothing to end. */
    void (*key_revoked)(struct sbxd *d, const char *key_id);
};

#endif
