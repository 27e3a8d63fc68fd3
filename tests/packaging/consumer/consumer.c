/* SPDX-License-Identifier: MIT */
/* A tiny program built against an installed (or embedded) libkbthreads. */
#include <kbthreads.h>
#include <stdio.h>
#include <string.h>

static int order[16], n;

static int rank_main(int rank, void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        order[n++] = rank;
        if (kb_yield() != 0)
            return 1;
    }
    return 0;
}

int main(void)
{
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 1;
    int rc = kb_spawn(ctx, rank_main, NULL, 3, NULL, NULL);
    kb_ctx_destroy(ctx);
    static const int want[] = {0, 1, 2, 0, 1, 2};
    if (rc != 0 || n != 6 || memcmp(order, want, sizeof want) != 0) {
        fprintf(stderr, "consumer: rc=%d n=%d\n", rc, n);
        return 1;
    }
    if (strcmp(kb_version(), KB_VERSION_STRING) != 0)
        return 1;
    printf("consumer (C) ok: libkbthreads %s\n", kb_version());
    return 0;
}
