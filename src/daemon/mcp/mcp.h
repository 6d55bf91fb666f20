/* The MCP server (docs/mcp.md): JSON-RPC over Streamable HTTP at /mcp, protocol versions
 * 2025-11-25 and 2025-06-18 (and 2025-03-26 clients, without batches). Tools only: the
 * agent tools of tools/ with their schemas; a tools/call runs through tools_call, with the
 * caller's key, so each sandbox is checked against that key on every call.
 *
 * A call answers application/json, or, when the client asked for progress, an SSE stream
 * of notifications/progress every 10 s and then the response. A command still running
 * after 50 s without progress is answered with a handle (its exec_id) to poll with
 * sandbox_exec, so no call outlives a client's 60 s request timeout (config.h). */
#ifndef SBX_MCP_H
#define SBX_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define MCP_PROTOCOL_LATEST "2025-11-25"
#define MCP_SERVER_VERSION "0.1.0"

struct sbxd;
struct mcp;
struct http_req;

void mcp_new(struct sbxd *d, struct mcp **out);
void mcp_free(struct mcp *m);

/* One JSON-RPC message POSTed to /mcp (the route checked the key, Origin and Host). */
void mcp_post(struct mcp *m, struct http_req *req);
/* DELETE /mcp: the end of a session. */
void mcp_delete(struct mcp *m, struct http_req *req);

/* One JSON-RPC message, checked as far as it can be before its method is looked at. */
struct mcp_msg {
    json_t *doc;        /* the whole message: the caller's to json_decref */
    const char *method; /* NULL for a response (or a method that is not a string) */
    json_t *id, *params;
    bool is_request; /* a method with an id (a string or an integer): it is answered */
};
/* 0, or -EINVAL with *code (JSON-RPC's) and *why for a 400 answer. Pure (fuzzed). */
int mcp_msg_parse(const char *body, size_t len, struct mcp_msg *out, int *code, const char **why);

#endif
