/* Prices and periods: plain arithmetic (price.c). */
#ifndef SBX_BILLING_PRICE_H
#define SBX_BILLING_PRICE_H

/* Micro-EUR for cumulative usage `used` (ms or byte-hours) of which `free_units` are free,
 * at price micro-EUR per `unit`: floor((used - free) * price / unit), 0 below the free
 * part. A charge is cost(before + in) - cost(before), so rounding never drifts. */
long long billing_cost(long long used, long long free_units, long long price, long long unit);
/* The first ms of the UTC month holding ms. */
long long billing_month_start(long long ms);

#endif
