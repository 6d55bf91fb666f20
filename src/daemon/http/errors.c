#include "errors.h"

#include <string.h>

#include "../../common/util.h"

static const struct {
    const char *code;
    unsigned status;
} table[] = {
    {"invalid_json", 400},
    {"invalid_request", 400},
    {"invalid_ttl", 400},
    {"invalid_env", 400},
    {"invalid_timeout", 400},
    {"invalid_cwd", 400},
    {"invalid_template", 400},
    {"invalid_backend", 400},
    {"invalid_key_request", 400},
    {"invalid_path", 400},
    {"invalid_input", 400},
    {"invalid_idempotency_key", 400},
    {"invalid_audit_query", 400},
    {"invalid_session_id", 400},
    {"invalid_signal", 400},
    {"invalid_pty_size", 400},
    {"invalid_wait", 400},
    {"invalid_cursor", 400},
    {"invalid_port", 400},
    {"missing_ticket", 401},
    {"invalid_ticket", 401},
    {"origin_not_allowed", 403},
    {"ticket_forbidden", 403},
    {"websocket_required", 426},
    {"too_many_tickets", 429},
    {"cannot_delete_default_session", 400},
    {"missing_api_key", 401},
    {"invalid_egress", 400},
    {"egress_unknown_preset", 400},
    {"egress_too_many_domains", 400},
    {"egress_ip_not_allowed", 400},
    {"egress_internal_domain", 400},
    {"egress_invalid_domain", 400},
    {"invalid_api_key", 401},
    {"insufficient_tool_level", 403},
    {"admin_required", 403},
    {"egress_denied", 403},
    {"invalid_signature", 403},
    {"link_expired", 403},
    {"preview_expired", 410},
    {"preview_not_found", 404},
    {"request_timeout", 408},
    {"too_many_preview_connections", 429},
    {"preview_unreachable", 502},
    {"not_found", 404},
    {"sandbox_not_found", 404},
    {"key_not_found", 404},
    {"file_not_found", 404},
    {"artifact_not_found", 404},
    {"exec_not_found", 404},
    {"session_not_found", 404},
    {"process_not_found", 404},
    {"pty_not_found", 404},
    {"method_not_allowed", 405},
    {"sandbox_busy", 409},
    {"kernel_busy", 409},
    {"sandbox_not_running", 409},
    {"idempotency_key_mismatch", 409},
    {"idempotency_key_in_progress", 409},
    {"session_exists", 409},
    {"process_not_running", 409},
    {"pty_not_running", 409},
    {"pty_input_full", 409},
    {"body_too_large", 413},
    {"file_too_large", 413},
    {"sandbox_concurrency_limit", 429},
    {"too_many_sessions", 429},
    {"too_many_processes", 429},
    {"too_many_ptys", 429},
    {"too_many_terminals", 429},
    {"sandbox_start_failed", 500},
    {"internal", 500},
    {"shutting_down", 503},
    {"kernel_unavailable", 503},
    {"workspace_too_large", 507},
    {"sandbox_capacity", 503},
};

unsigned http_status_for_code(const char *code)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(table); i++)
        if (!strcmp(table[i].code, code))
            return table[i].status;
    return 500;
}
