/* A tool's answer as an MCP CallToolResult (docs/mcp.md): structuredContent is the answer
 * itself, content its JSON as text plus an image block per plot the kernel returned and
 * a resource_link per file that is fetched by link rather than inlined. A failure is
 * isError with the API's error code, never structuredContent (clients validate it even
 * on errors). Pure: no I/O. */
#ifndef SBX_MCP_CONTENT_H
#define SBX_MCP_CONTENT_H

#include <jansson.h>

#include "../../common/err.h"

/* The most text one result carries (the stdio bridge's clients buffer 10 MiB a line). */
#define MCP_TEXT_MAX (4u * 1024u * 1024u)

json_t *mcp_tool_result(json_t *answer);
json_t *mcp_tool_error(const struct sbx_err *err, json_t *details);

#endif
