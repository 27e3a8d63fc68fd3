/* SPDX-License-Identifier: MIT */
/*
 * Peer: SimGrid actors doing the same yields as the libkbthreads yield
 * benchmark.
 *
 *   peer_simgrid --cfg=contexts/factory:thread|raw --n N --m M
 *
 * N actors on one host each call this_actor::yield() once (warm-up), stamp
 * the clock, yield M times and stamp it again; ns per yield = (latest last
 * stamp - earliest first stamp) / (N * M), exactly as in kb_bench. Under
 * the thread factory every actor is an OS thread and a yield is two
 * handoffs (actor -> maestro -> next actor); under raw, two user-level
 * context switches. One repetition per process (an Engine runs once).
 */
#include <simgrid/s4u.hpp>
#include <simgrid/version.h>
#include <xbt/config.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

long arg_value(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (std::strcmp(argv[i], name) == 0)
            return std::strtol(argv[i + 1], nullptr, 10);
    return def;
}

} // namespace

int main(int argc, char **argv)
{
    sg4::Engine engine(&argc, argv); /* consumes --cfg=... and --log=... */
    long n = arg_value(argc, argv, "--n", 1);
    long m = arg_value(argc, argv, "--m", 1000);
    if (n < 1 || m < 1) {
        std::fprintf(stderr, "peer_simgrid: --n and --m must be at least 1\n");
        return 2;
    }
    std::string factory = simgrid::config::get_value<std::string>("contexts/factory");

    auto *zone = sg4::create_full_zone("bench");
    sg4::Host *host = zone->create_host("host", 1e9);
    zone->seal();

    std::vector<uint64_t> t_first(static_cast<size_t>(n)), t_last(static_cast<size_t>(n));
    for (long r = 0; r < n; r++) {
        sg4::Actor::create("rank" + std::to_string(r), host, [r, m, &t_first, &t_last] {
            sg4::this_actor::yield();
            t_first[static_cast<size_t>(r)] = now_ns();
            for (long s = 0; s < m; s++)
                sg4::this_actor::yield();
            t_last[static_cast<size_t>(r)] = now_ns();
        });
    }
    engine.run();

    uint64_t first = UINT64_MAX, last = 0;
    for (long r = 0; r < n; r++) {
        first = std::min(first, t_first[static_cast<size_t>(r)]);
        last = std::max(last, t_last[static_cast<size_t>(r)]);
    }
    uint64_t ops = static_cast<uint64_t>(n) * static_cast<uint64_t>(m);
    std::printf("KBI,simgrid_version,%d.%d\n", SIMGRID_VERSION_MAJOR, SIMGRID_VERSION_MINOR);
    std::printf("KBR,yield,simgrid_%s,0,%ld,0,%.3f,ns,%" PRIu64 "\n", factory.c_str(), n,
                static_cast<double>(last - first) / static_cast<double>(ops), ops);
    return 0;
}
