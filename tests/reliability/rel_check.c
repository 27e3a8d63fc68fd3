/* SPDX-License-Identifier: MIT */
/* The checker: run a program on the library and on the model, compare. */
#include <stdlib.h>
#include <string.h>

#include "rel_run.h"
#include "trace.h"

static void first_difference(const char *a, const char *b, FILE *out)
{
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    const char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
    fprintf(out, "first difference at line %d:\n  library: %.*s\n  model:   %.*s\n", line,
            (int)(ea ? ea - la : (long)strlen(la)), la, (int)(eb ? eb - lb : (long)strlen(lb)), lb);
}

int rel_check(const struct rp_prog *p, FILE *out)
{
    struct rp_clock clock;
    int rc = rr_run(p, &clock, NULL);
    char *real = strdup(tr_text());
    if (!real)
        abort();
    rm_run(p, &clock, RM_EXACT);
    int same = rc == 0 && strcmp(real, tr_text()) == 0;
    if (!same && out) {
        rp_dump(p, out);
        fprintf(out, "--- library ---\n%s--- model ---\n%s---\n", real, tr_text());
        first_difference(real, tr_text(), out);
    }
    free(real);
    return same ? 0 : 1;
}
