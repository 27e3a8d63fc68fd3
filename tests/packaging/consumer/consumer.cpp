/* SPDX-License-Identifier: MIT */
// The same from C++: the header is usable as is (extern "C", [[noreturn]]).
#include <kbthreads.h>

#include <cstdio>
#include <cstring>
#include <vector>

static std::vector<int> order;

static int rank_main(int rank, void *)
{
    for (int i = 0; i < 2; i++) {
        order.push_back(rank);
        if (kb_yield() != 0)
            return 1;
    }
    return 0;
}

int main()
{
    kb_ctx *ctx = nullptr;
    if (kb_ctx_create(nullptr, &ctx) != 0)
        return 1;
    kb_spawn_error *err = nullptr;
    int rc = kb_spawn(ctx, rank_main, nullptr, 3, nullptr, &err);
    kb_spawn_error_free(err);
    kb_ctx_destroy(ctx);
    if (rc != 0 || order != std::vector<int>{0, 1, 2, 0, 1, 2}) {
        std::fprintf(stderr, "consumer: rc=%d n=%zu\n", rc, order.size());
        return 1;
    }
    std::printf("consumer (C++) ok: libkbthreads %s\n", kb_version());
    return 0;
}
