/* A provider configuration's (e2b, cube) lists from its provider: its sandboxes (the
 * inventory) and its templates (templates/query), asked on a worker thread, since a
 * provider may take its whole http_timeout_sec to answer (docs/providers.md). */
#ifndef SBX_DAEMON_CONFIGS_PROVIDER_LIST_H
#define SBX_DAEMON_CONFIGS_PROVIDER_LIST_H

#include <jansson.h>
#include <stdbool.h>

struct sbxd;

enum provider_list_kind { PROVIDER_LIST_SANDBOXES, PROVIDER_LIST_TEMPLATES };

/* result (taken): {reachable: true, list: [...], latency_ms} or {reachable: false,
 * error, code, latency_ms}; called on the event loop. */
typedef void (*provider_list_done)(void *data, json_t *result);

/* Ask the provider of doc (a stored or probed configuration's document; config_id: whose
 * sealed key it holds) for a list with its connection, or the platform's SBX_E2B_* /
 * SBX_CUBE_* one without. False when doc's backend is not a provider's (done is never
 * called); otherwise done follows, once. */
bool configs_provider_list(struct sbxd *d, const char *config_id, const json_t *doc,
                           enum provider_list_kind kind, provider_list_done done, void *data);

#endif
