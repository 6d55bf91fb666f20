/* The route tables of every feature, each defined in the feature's own *_api.c beside
 * the handlers it lists; routes.c puts them together for the router. */
#ifndef SBX_ROUTES_H
#define SBX_ROUTES_H

#include <stddef.h>
#include <stdio.h>

#include "http/router.h"

extern const struct route_table key_routes;      /* keys/keys_api.c */
extern const struct route_table audit_routes;    /* audit/audit_api.c */
extern const struct route_table sandbox_routes;  /* sandbox/sandbox_api.c */
extern const struct route_table snapshot_routes; /* snapshot/snapshot_api.c */
extern const struct route_table exec_routes;     /* exec/exec_api.c */
extern const struct route_table session_routes;  /* exec/sessions_api.c */
extern const struct route_table process_routes;  /* exec/processes_api.c */
extern const struct route_table file_routes;     /* files/files_api.c */
extern const struct route_table artifact_routes; /* files/artifacts_api.c */
extern const struct route_table egress_routes;   /* egress/egress_api.c */
extern const struct route_table kernel_routes;   /* live/kernel_api.c */
extern const struct route_table pty_routes;      /* live/pty_api.c */
extern const struct route_table terminal_routes; /* live/terminal_api.c */
extern const struct route_table preview_routes;  /* live/preview_api.c */
extern const struct route_table skill_routes;    /* skills/skills_api.c */
extern const struct route_table skill_install_routes; /* skills/installs_api.c */
extern const struct route_table wallet_routes;   /* billing/wallet_api.c */
extern const struct route_table metrics_routes;  /* billing/metrics_api.c */
extern const struct route_table tool_routes;     /* tools/tools_api.c */
extern const struct route_table mcp_routes;      /* mcp/mcp_api.c */
extern const struct route_table openapi_routes;  /* openapi/openapi_api.c */
/* Sandbox configurations, personal variables, the probe (docs/configs.md). */
extern const struct route_table config_routes; /* configs/configs_api.c */
extern const struct route_table unclaimed_routes; /* configs/unclaimed_api.c */
extern const struct route_table me_routes;     /* configs/me_api.c */
extern const struct route_table probe_routes;  /* configs/probe_api.c */
extern const struct route_table templates_query_routes; /* configs/templates_query_api.c */
extern const struct route_table e2b_secret_routes; /* e2b/e2b_secrets.c */
extern const struct route_table e2b_snapshot_routes; /* e2b/e2b_snapshots.c */
extern const struct route_table e2b_volume_routes; /* e2b/e2b_volumes.c */
extern const struct route_table e2b_api_routes;  /* e2b/e2b_api.c */
extern const struct route_table e2b_sandbox_routes; /* e2b/envd_api.c */
extern const struct route_table e2b_template_routes;     /* e2b/e2b_templates.c */
extern const struct route_table e2b_template_tag_routes; /* e2b/e2b_template_tags.c */
extern const struct route_table template_routes; /* templates/templates_api.c */
extern const struct route_table chat_routes;     /* chat/chat_api.c */
extern const struct route_table template_build_routes; /* templates/build_api.c */
extern const struct route_table template_docker_routes; /* templates/docker_export.c */
extern const struct route_table node_routes;     /* cluster/cluster_api.c */
extern const struct route_table volume_routes;   /* volumes/volumes_api.c */
extern const struct route_table volume_file_routes; /* volumes/volfiles_api.c */
extern const struct route_table console_routes;  /* console/console_api.c */

/* Every table sbxd serves, /healthz first. */
extern const struct route_table *const sbxd_routes[];
extern const size_t sbxd_route_tables;

/* `sbxd --routes`: one "METHOD PATTERN" line per route, for the OpenAPI coverage test. */
void sbxd_routes_print(FILE *out);

#endif
