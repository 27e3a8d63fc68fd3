#!/bin/sh
# SPDX-License-Identifier: MIT
# The public header compiles cleanly on its own as C11, C17 and C++17 with
# -Wall -Wextra -pedantic -Werror (gcc and g++, and clang when present), and
# so does the C++ layer kbthreads.hpp, every template instantiated, as C++17
# and C++20 with g++ and clang++.
# usage: header_check.sh path/to/include
set -eu
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/use.c" <<'SRC'
#include <kbthreads.h>
#include <kbthreads.h> /* include guard */
static int fn(int rank, void *arg) { (void)arg; return rank < 0 ? kb_yield() : 0; }
int main(void)
{
    kb_spawn_opts o = {.cancel_mode = KB_CANCEL_RETURN};
    kb_engine e = {0, 0, 0, 0};
    kb_rank_fn f = fn;
    (void)o; (void)e; (void)f;
    return kb_strerror(KB_ESPAWN) == 0;
}
SRC
cat > "$tmp/use.cpp" <<'SRC'
#include <kbthreads.h>
static int fn(int rank, void *) { return rank < 0 ? kb_yield() : 0; }
int main()
{
    kb_spawn_opts o{};
    o.cancel_mode = KB_CANCEL_RETURN;
    kb_engine e{};
    kb_rank_fn f = fn;
    (void)o; (void)e; (void)f;
    return kb_strerror(KB_ESPAWN) == nullptr;
}
SRC
cat > "$tmp/use.hpp.cpp" <<'SRC'
#include <kbthreads.hpp>
#include <kbthreads.hpp> // include guard
#include <memory>
struct eng : kb::engine {
    int wait(kb_handle, void *, kb_wait_origin) override { return 0; }
};
static int fn(int rank) { return rank; }
int main()
{
    eng e;
    kb::context ctx(e);
    auto owned = std::make_unique<int>(1);
    ctx.spawn(2, [&](int) { kb::yield(); kb::wait(1); kb::barrier(); });
    ctx.spawn(2, fn);
    kb::process_context pc = ctx.start(2, [p = std::move(owned)](int r) { return *p + r + kb::rank(); });
    bool done = pc.join(std::chrono::milliseconds(5));
    pc.join();
    try {
        ctx.wait(2);
    } catch (const kb::spawn_error &x) {
        return static_cast<int>(x.ranks().size());
    } catch (const std::system_error &x) {
        return x.code() == std::errc::invalid_argument;
    }
    return done && kb::category().name() != nullptr;
}
SRC
fail=0
check() {
    if "$@" -fsyntax-only -Wall -Wextra -pedantic -Werror -I"$inc" 2>"$tmp/err"; then
        echo "ok: $*"
    else
        echo "FAILED: $*"; cat "$tmp/err"; fail=1
    fi
}
check gcc -std=c11 "$tmp/use.c"
check gcc -std=c17 "$tmp/use.c"
check g++ -std=c++17 "$tmp/use.cpp"
check g++ -std=c++17 "$tmp/use.hpp.cpp"
check g++ -std=c++20 "$tmp/use.hpp.cpp"
if command -v clang >/dev/null 2>&1; then
    check clang -std=c11 "$tmp/use.c"
    check clang++ -std=c++17 -x c++ "$tmp/use.cpp"
    check clang++ -std=c++17 "$tmp/use.hpp.cpp"
    check clang++ -std=c++20 "$tmp/use.hpp.cpp"
fi
exit $fail
