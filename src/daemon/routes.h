/* The route tables of every feature, each defined in the feature's own *_api.c beside
 * the handlers it lists; routes.c puts them together for the router. */
#ifndef SBX_ROUTES_H
#define SBX_ROUTES_H

#include <stddef.h>

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
extern const struct route_table template_routes; /* templates/templates_api.c */

/* Every table sbxd serves, /healthz first. */
extern const struct route_table *const sbxd_routes[];
extern const size_t sbxd_route_tables;

#endif
