/* SQL text for drivers whose placeholders are $N (db_sql_dollar, db_driver.h): apart from
 * db.c, which opens the drivers, so that a driver does not call back into it. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "db_driver.h"

int db_sql_dollar(const char *sql, char **out, int *nparams, struct sbx_err *err)
{
    size_t len = strlen(sql);
    /* "?" becomes at most "$32": never more than 3 bytes per placeholder. */
    char *o = sbx_xmalloc(len * 3 + 1), *w = o;
    int max = 0;
    for (const char *p = sql; *p;) {
        if (*p == '\'' || *p == '"') {
            char q = *p;
            *w++ = *p++;
            while (*p && !(*p == q && p[1] != q)) {
                if (*p == q) /* a doubled quote inside */
                    *w++ = *p++;
                *w++ = *p++;
            }
            if (*p)
                *w++ = *p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n')
                *w++ = *p++;
        } else if (*p == '?') {
            p++;
            int n;
            if (isdigit((unsigned char)*p)) {
                char *end;
                long v = strtol(p, &end, 10);
                n = v > 0 && v <= DB_PARAMS_MAX ? (int)v : -1;
                p = end;
            } else {
                n = max + 1;
            }
            if (n < 1 || n > DB_PARAMS_MAX) {
                free(o);
                return sbx_err_set(err, EINVAL, "store_error",
                                   "store: a placeholder beyond ?%d in: %.200s", DB_PARAMS_MAX,
                                   sql);
            }
            max = n > max ? n : max;
            w += sprintf(w, "$%d", n);
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    *out = o;
    *nparams = max;
    return 0;
}
