#include "catalog.h"

#include <string.h>

#include "../../common/util.h"

#define SBX_ID "\"sandbox_id\":{\"type\":\"string\",\"description\":\"The sandbox to act on.\"}"
#define SECONDS(what)                                                                              \
    "{\"type\":\"number\",\"minimum\":0,\"maximum\":60,\"description\":\"" what "\"}"
#define OBJ_ANY "{\"type\":\"object\"}"

#define EXEC_OUT                                                                                   \
    "{\"type\":\"object\",\"properties\":{\"exit_code\":{\"type\":\"integer\"},"                   \
    "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"                           \
    "\"timed_out\":{\"type\":\"boolean\"},\"oom_killed\":{\"type\":\"boolean\"},"                  \
    "\"process_limit_killed\":{\"type\":\"boolean\"},\"status\":{\"type\":\"string\"}}}"

#define PTY_OUT                                                                                    \
    "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"},"                   \
    "\"pid\":{\"type\":[\"integer\",\"null\"]},\"stdout\":{\"type\":\"string\"},"                  \
    "\"cursor\":{\"type\":\"integer\"},\"alive\":{\"type\":\"boolean\"},"                          \
    "\"status\":{\"type\":[\"string\",\"null\"]},\"exit_code\":{\"type\":[\"integer\",\"null\"]}}" \
    ","                                                                                            \
    "\"required\":[\"stdout\",\"cursor\",\"alive\"]}"

#define RUN_CODE_IN                                                                                \
    "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"code\":{\"type\":\"string\","               \
    "\"description\":\"Python source; state persists between calls.\"},"                           \
    "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":900}},"                   \
    "\"required\":[\"sandbox_id\",\"code\"]}"

#define RUN_CODE_OUT                                                                               \
    "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},"                       \
    "\"stderr\":{\"type\":\"string\"},\"result\":{\"type\":[\"string\",\"null\"]},"                \
    "\"error\":{\"type\":[\"object\",\"null\"]},\"outputs\":{\"type\":\"array\"}},"                \
    "\"required\":[\"stdout\",\"stderr\"]}"

#define SANDBOX_OUT                                                                                \
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"                           \
    "\"status\":{\"type\":\"string\"}},\"required\":[\"id\"]}"

static const struct tool_def defs[] = {
    {TOOL_SANDBOX_CREATE, "sandbox_create", "Create a sandbox",
     "Create a new isolated sandbox (a machine with a persistent /workspace) and wait until it "
     "is ready. Returns its id, which every other tool takes as sandbox_id. volumes mounts the "
     "caller's named volumes (storage that outlives sandboxes) at absolute paths.",
     "{\"type\":\"object\",\"properties\":{\"template\":{\"type\":\"string\"},"
     "\"ttl_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400},"
     "\"backend\":{\"type\":\"string\",\"enum\":[\"v1\",\"v2\"]},"
     "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
     "\"volumes\":{\"type\":\"array\",\"maxItems\":8,\"items\":{\"type\":\"object\","
     "\"properties\":{\"volume\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
     "\"read_only\":{\"type\":\"boolean\"}},\"required\":[\"volume\",\"path\"]}}}}",
     SANDBOX_OUT, false, false, false, false},
    {TOOL_SANDBOX_LIST, "sandbox_list", "List sandboxes", "List your live sandboxes.",
     "{\"type\":\"object\",\"properties\":{}}",
     "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\"}},"
     "\"required\":[\"sandboxes\"]}",
     true, false, true, false},
    {TOOL_SANDBOX_KILL, "sandbox_kill", "Destroy a sandbox", "Destroy a sandbox and its workspace.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID "},\"required\":[\"sandbox_id\"]}",
     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
     "\"deleted\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"deleted\"]}",
     false, true, true, true},
    {TOOL_SANDBOX_EXEC, "sandbox_exec", "Run a command",
     "Run a shell line (shell) or code in a language (language: python, bash or node; code) "
     "in the sandbox, in /workspace, and return its exit code and output with a receipt. "
     "With exec_id instead: the state or result of a command answered while still running.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"shell\":{\"type\":\"string\"},"
     "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"bash\",\"node\"]},"
     "\"code\":{\"type\":\"string\"},"
     "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":900},"
     "\"cwd\":{\"type\":\"string\"},\"exec_id\":{\"type\":\"string\"},"
     "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}},"
     "\"required\":[\"sandbox_id\"]}",
     EXEC_OUT, false, true, false, true},
    {TOOL_SANDBOX_BASH, "sandbox_bash", "Run a shell command",
     "Run one shell command in the sandbox and return its output, exit code, and the files it "
     "created or changed under /workspace/out (with SHA-256 and where to fetch them).",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"command\":{\"type\":\"string\","
     "\"description\":\"The shell command.\"},\"description\":{\"type\":\"string\","
     "\"description\":\"A short label of what it does.\"},"
     "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,"
     "\"description\":\"Default 60 (or the sandbox configuration's default_timeout_sec).\"},\"cwd\":{\"type\":\"string\","
     "\"description\":\"Working directory (default /workspace).\"}},"
     "\"required\":[\"sandbox_id\",\"command\"]}",
     "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},"
     "\"stderr\":{\"type\":\"string\"},\"exit_code\":{\"type\":\"integer\"},"
     "\"truncated\":{\"type\":\"boolean\"},\"files\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
     "\"size\":{\"type\":\"integer\"},\"sha256\":{\"type\":\"string\"}}}},"
     "\"file_count\":{\"type\":\"integer\"},\"local_paths\":{\"type\":\"object\"}},"
     "\"required\":[\"stdout\",\"stderr\",\"exit_code\",\"truncated\",\"files\",\"file_count\","
     "\"local_paths\"]}",
     false, true, false, true},
    {TOOL_SANDBOX_RUN_CODE, "sandbox_run_code", "Run Python in the kernel",
     "Run Python in the sandbox's persistent kernel (variables, imports and files persist "
     "between calls). Plots and other rich outputs come back as outputs (images as image "
     "content).",
     RUN_CODE_IN, RUN_CODE_OUT, false, true, false, true},
    {TOOL_REPL_EXECUTE, "repl_execute", "Python REPL",
     "Run code in the persistent Python REPL of the sandbox, with the helpers peek, grep, "
     "chunk_indices, llm_query and FINAL. Returns stdout, stderr, result, error and rich "
     "outputs.",
     RUN_CODE_IN, RUN_CODE_OUT, false, true, false, true},
    {TOOL_EXEC_COMMAND, "exec_command", "Run in a terminal",
     "Run a command in a PTY. A command that ends within grace_seconds returns its output and "
     "exit_code; a long-lived one (server, REPL, watcher) stays alive and returns a "
     "session_id for write_stdin.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"command\":{\"type\":\"string\"},"
     "\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
     "\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
     "\"grace_seconds\":" SECONDS(
         "How long to wait for a quick command to end.") "},"
                                                         "\"required\":[\"sandbox_id\",\"command\"]"
                                                         "}",
     PTY_OUT, false, true, false, true},
    {TOOL_WRITE_STDIN, "write_stdin", "Write to a terminal",
     "Send characters to a live exec_command session and read its new output (add \\n to send "
     "a line). since: the cursor of the last read.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"session_id\":{\"type\":\"string\"},"
     "\"input\":{\"type\":\"string\"},\"since\":{\"type\":\"integer\",\"minimum\":0},"
     "\"wait_seconds\":" SECONDS("How long to wait for new output.") "},"
                                                                     "\"required\":[\"sandbox_id\","
                                                                     "\"session_id\",\"input\"]}",
     PTY_OUT, false, true, false, true},
    {TOOL_EDIT_FILE, "edit_file", "Edit a file",
     "Replace old_string by new_string in a workspace file. Exact match first, then ignoring "
     "trailing whitespace, then ignoring indentation (the replacement is re-indented), then "
     "the most similar lines (score >= 0.8). Refuses ambiguous or distant matches with the "
     "nearest candidates and their line numbers. Also takes the text-editor commands "
     "(command: view, create, str_replace, insert). Answers a unified diff and the new "
     "SHA-256.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"path\":{\"type\":\"string\","
     "\"description\":\"Relative to /workspace (or absolute under it).\"},"
     "\"old_string\":{\"type\":\"string\"},\"new_string\":{\"type\":\"string\"},"
     "\"replace_all\":{\"type\":\"boolean\"},\"create\":{\"type\":\"boolean\","
     "\"description\":\"Create the file (old_string empty) when it does not exist.\"},"
     "\"command\":{\"type\":\"string\",\"enum\":[\"view\",\"create\",\"str_replace\","
     "\"insert\"]},\"file_text\":{\"type\":\"string\"},\"old_str\":{\"type\":\"string\"},"
     "\"new_str\":{\"type\":\"string\"},\"insert_line\":{\"type\":\"integer\",\"minimum\":0},"
     "\"view_range\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}},"
     "\"required\":[\"sandbox_id\",\"path\"]}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
     "\"sha256\":{\"type\":\"string\"},\"diff\":{\"type\":\"string\"}},\"required\":[\"path\"]}",
     false, true, false, true},
    {TOOL_SANDBOX_FILES, "sandbox_files", "Workspace files",
     "Files in /workspace: op list (path, recursive), read (at most 256 KB inline; larger "
     "files answer a link with SHA-256), write (path, content, encoding utf-8 or base64) or "
     "artifacts (the files under /workspace/out with signed links and SHA-256).",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"op\":{\"type\":\"string\","
     "\"enum\":[\"list\",\"read\",\"write\",\"artifacts\"]},\"path\":{\"type\":\"string\"},"
     "\"content\":{\"type\":\"string\"},\"encoding\":{\"type\":\"string\","
     "\"enum\":[\"utf-8\",\"base64\"]},\"recursive\":{\"type\":\"boolean\"}},"
     "\"required\":[\"sandbox_id\",\"op\"]}",
     OBJ_ANY, false, false, false, true},
    {TOOL_SANDBOX_PAUSE, "sandbox_pause", "Pause a sandbox",
     "Checkpoint a running v2 sandbox with its memory and stop it.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID "},\"required\":[\"sandbox_id\"]}", SANDBOX_OUT,
     false, false, true, true},
    {TOOL_SANDBOX_RESUME, "sandbox_resume", "Resume a sandbox",
     "Bring a paused sandbox back (with its memory when the image restores).",
     "{\"type\":\"object\",\"properties\":{" SBX_ID "},\"required\":[\"sandbox_id\"]}", SANDBOX_OUT,
     false, false, true, true},
    {TOOL_SANDBOX_FORK, "sandbox_fork", "Fork a sandbox",
     "Copy a running v2 sandbox with its memory and workspace into count new sandboxes.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"count\":{\"type\":\"integer\","
     "\"minimum\":1},\"ttl_seconds\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"sandbox_id\"]}",
     "{\"type\":\"object\",\"properties\":{\"parent_id\":{\"type\":\"string\"},"
     "\"data\":{\"type\":\"array\"}},\"required\":[\"parent_id\",\"data\"]}",
     false, false, false, true},
    {TOOL_SANDBOX_PREVIEW, "sandbox_preview", "Preview a port",
     "A signed URL to a port (1024-65535) a server listens on inside a v2 sandbox.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"port\":{\"type\":\"integer\","
     "\"minimum\":1024,\"maximum\":65535},\"ttl_seconds\":{\"type\":\"integer\","
     "\"minimum\":60,\"maximum\":3600}},\"required\":[\"sandbox_id\",\"port\"]}",
     "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"},"
     "\"port\":{\"type\":\"integer\"},\"expires_at\":{\"type\":\"integer\"}},"
     "\"required\":[\"url\",\"port\"]}",
     false, false, false, true},
    {TOOL_BSL_CHECK, "bsl_check", "Check 1C (BSL) code",
     "Static analysis of 1C:Enterprise (BSL) and OneScript code with sbx-bsl, the sandbox's "
     "bsl-language-server-compatible analyzer: give a .bsl or .os file or a folder of a "
     "configuration dump under /workspace; returns diagnostics with bsl-language-server's "
     "codes (ParseError, UnusedLocalVariable, EmptyCodeBlock, ...) in its JSON report shape "
     "(fileinfos[].diagnostics[] with range, severity, code, message; line and column "
     "1-based) and a summary by severity.",
     "{\"type\":\"object\",\"properties\":{" SBX_ID ",\"path\":{\"type\":\"string\","
     "\"description\":\"A .bsl/.os module or a folder, relative to /workspace (or absolute "
     "under it); empty for the whole workspace.\"},\"diagnostics\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"},\"description\":\"Only these diagnostic codes, "
     "e.g. [\\\"UnusedLocalVariable\\\", \\\"ParseError\\\"]; default all.\"},"
     "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":2000,"
     "\"description\":\"Diagnostics listed at most (default 500); the summary counts all.\"},"
     "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":900,"
     "\"description\":\"Default 120.\"}},\"required\":[\"sandbox_id\",\"path\"]}",
     "{\"type\":\"object\",\"properties\":{\"fileinfos\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
     "\"diagnostics\":{\"type\":\"array\"}}}},\"summary\":{\"type\":\"object\","
     "\"properties\":{\"files\":{\"type\":\"integer\"},\"diagnostics\":{\"type\":"
     "\"integer\"},\"truncated\":{\"type\":\"boolean\"},\"by_severity\":{\"type\":"
     "\"object\"}}}},\"required\":[\"fileinfos\",\"summary\"]}",
     true, false, true, true},
};

const struct tool_def *tools_find(const char *name)
{
    for (size_t i = 0; name && i < SBX_ARRAY_SIZE(defs); i++)
        if (!strcmp(defs[i].name, name))
            return &defs[i];
    return NULL;
}

static json_t *schema(const char *text)
{
    json_t *s = json_loads(text, 0, NULL);
    return s ? s : json_object(); /* the catalogue's own text: a unit test parses every one */
}

json_t *tools_list_mcp(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < SBX_ARRAY_SIZE(defs); i++) {
        const struct tool_def *t = &defs[i];
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}", "name",
                                           t->name, "title", t->title, "description",
                                           t->description, "inputSchema", schema(t->input_schema),
                                           "outputSchema", schema(t->output_schema), "annotations",
                                           "title", t->title, "readOnlyHint", t->read_only,
                                           "destructiveHint", t->destructive, "idempotentHint",
                                           t->idempotent, "openWorldHint", 0));
    }
    return a;
}

json_t *tools_list_openai(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < SBX_ARRAY_SIZE(defs); i++)
        json_array_append_new(a, json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function",
                                           "name", defs[i].name, "description", defs[i].description,
                                           "parameters", schema(defs[i].input_schema)));
    return a;
}
