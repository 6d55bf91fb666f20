/* Minimal checks for C unit tests. A unit test prints one line per check and ends
 * with exactly "N passed, N failed, N skipped" (tests/run.py parses it), exiting non-zero on
 * any failure. A part that cannot run here says why with SKIP(): tests/run.py reports it as
 * a skip, and `make test` fails on a skip it does not expect (docs/architecture.md, Tests):
 *
 *     #include "check.h"
 *     int main(void) {
 *         CHECK(1 + 1 == 2, "arithmetic");
 *         CHECK_EQ_INT(f(), 3, "f returns 3");
 *         return CHECK_DONE();
 *     }
 *
 * Single-file use only (the counters are static). */
#ifndef SBX_TEST_CHECK_H
#define SBX_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed_, check_failed_, check_skipped_;

static inline int check_report_(int ok, const char *file, int line, const char *what,
                                const char *detail)
{
    if (ok) {
        check_passed_++;
        printf("ok   %s\n", what);
    } else {
        check_failed_++;
        printf("FAIL %s (%s:%d)%s%s\n", what, file, line, detail ? ": " : "", detail ? detail : "");
    }
    fflush(stdout);
    return ok;
}

/* CHECK(cond, fmt, ...): the description is a printf format. Evaluates to cond. */
#define CHECK(cond, ...)                                                                           \
    ({                                                                                             \
        char check_what_[256];                                                                     \
        snprintf(check_what_, sizeof(check_what_), __VA_ARGS__);                                   \
        check_report_(!!(cond), __FILE__, __LINE__, check_what_, #cond);                           \
    })

#define CHECK_EQ_INT(got, want, ...)                                                               \
    ({                                                                                             \
        long long check_g_ = (long long)(got), check_w_ = (long long)(want);                       \
        char check_what_[256], check_d_[128];                                                      \
        snprintf(check_what_, sizeof(check_what_), __VA_ARGS__);                                   \
        snprintf(check_d_, sizeof(check_d_), "got %lld, want %lld", check_g_, check_w_);           \
        check_report_(check_g_ == check_w_, __FILE__, __LINE__, check_what_, check_d_);            \
    })

#define CHECK_MEM(got, want, len, ...)                                                             \
    ({                                                                                             \
        char check_what_[256];                                                                     \
        snprintf(check_what_, sizeof(check_what_), __VA_ARGS__);                                   \
        check_report_(memcmp((got), (want), (len)) == 0, __FILE__, __LINE__, check_what_,          \
                      "bytes differ");                                                             \
    })

/* SKIP(fmt, ...): a part of the test that did not run, and why (one "SKIP <why>" line). */
#define SKIP(...)                                                                                  \
    ({                                                                                             \
        check_skipped_++;                                                                          \
        printf("SKIP ");                                                                           \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    })

/* Print the summary line and return the process exit status. */
#define CHECK_DONE()                                                                               \
    (printf("%d passed, %d failed, %d skipped\n", check_passed_, check_failed_, check_skipped_),   \
     fflush(stdout), check_failed_ ? 1 : 0)

#endif
