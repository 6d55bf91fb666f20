/* The agent tools' catalogue (docs/tools.md): each tool's name, description, input and
 * output JSON Schemas (a draft-07-compatible subset, no $ref, so MCP clients that validate
 * with Ajv accept them) and MCP annotations, listed for MCP (tools/list) and as OpenAI
 * function definitions. */
#ifndef SBX_CATALOG_H
#define SBX_CATALOG_H

#include <jansson.h>
#include <stdbool.h>

enum tool_id {
    TOOL_SANDBOX_CREATE,
    TOOL_SANDBOX_LIST,
    TOOL_SANDBOX_KILL,
    TOOL_SANDBOX_EXEC,
    TOOL_SANDBOX_BASH,
    TOOL_SANDBOX_RUN_CODE,
    TOOL_REPL_EXECUTE,
    TOOL_EXEC_COMMAND,
    TOOL_WRITE_STDIN,
    TOOL_EDIT_FILE,
    TOOL_SANDBOX_FILES,
    TOOL_SANDBOX_PAUSE,
    TOOL_SANDBOX_RESUME,
    TOOL_SANDBOX_FORK,
    TOOL_SANDBOX_PREVIEW,
    TOOL_BSL_CHECK,
};

struct tool_def {
    enum tool_id id;
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON text */
    const char *output_schema; /* JSON text */
    bool read_only, destructive, idempotent;
    bool needs_sandbox; /* takes sandbox_id */
};

/* NULL for an unknown name. */
const struct tool_def *tools_find(const char *name);
/* [{name, title, description, inputSchema, outputSchema, annotations}] (MCP tools/list). */
json_t *tools_list_mcp(void);
/* [{type: "function", function: {name, description, parameters}}]. */
json_t *tools_list_openai(void);

#endif
