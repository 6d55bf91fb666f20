/* Prices and periods (billing_cost, billing_month_start, billing.h): plain arithmetic the
 * meter (meter.c) and the wallet routes use, apart from billing.c so the meter, which
 * billing.c runs, does not call back into it. */
#include <time.h>

#include "price.h"

long long billing_cost(long long used, long long free_units, long long price, long long unit)
{
    if (used <= free_units || unit <= 0)
        return 0;
    return (long long)((__int128)(used - free_units) * price / unit);
}

long long billing_month_start(long long ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    return (long long)timegm(&tm) * 1000;
}
