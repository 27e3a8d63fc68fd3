/* SPDX-License-Identifier: MIT */
// The C++ layer (kbthreads.hpp) from an installed (or embedded) tree: a
// lambda rank, a failing rank as kb::spawn_error.
#include <kbthreads.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

int main()
{
    kb::context ctx;
    std::vector<int> order;
    ctx.spawn(3, [&](int rank) {
        for (int i = 0; i < 2; i++) {
            order.push_back(rank);
            kb::yield();
        }
    });
    if (order != std::vector<int>{0, 1, 2, 0, 1, 2})
        return 1;
    try {
        ctx.spawn(2, [](int rank) {
            if (rank == 1)
                throw std::runtime_error("expected");
        });
        return 1;
    } catch (const kb::spawn_error &e) {
        if (e.ranks().size() != 1 || e.ranks()[0].rank != 1)
            return 1;
    }
    std::printf("consumer (C++ layer) ok: libkbthreads %s\n", kb_version());
    return 0;
}
