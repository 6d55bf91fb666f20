/* billing/'s inside: the state billing.c keeps and meter.c works on. */
#ifndef SBX_BILLING_INTERNAL_H
#define SBX_BILLING_INTERNAL_H

#include <stddef.h>

#include "../auth/auth.h"
#include "../store/store.h"

struct billing_inflight {
    long long token;
    long long started_mono;
    char user[AUTH_USER_MAX + 1];
    char key_id[AUTH_KEY_ID_LEN + 1];
    char sandbox_id[STORE_ID_MAX + 1];
    char backend[8];
};

struct billing {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct store *store;
    struct loop_timer *tick;
    struct billing_inflight *inflight;
    size_t ninflight;
    long long last_token;
};

/* Meter sb's running time from its mark up to now (chunks never straddle an interval). */
void billing_meter_running(struct billing *b, const struct store_sandbox *sb, long long now);
/* Meter running v2 sandboxes and paused snapshots up to now, then settle every
 * interval that has ended (meter.c). */
void billing_run(struct billing *b, long long now_ms);

#endif
