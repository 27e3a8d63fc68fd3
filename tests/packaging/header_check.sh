#!/bin/sh
# The public header compiles cleanly on its own as C11, C17 and C++17 with
# -Wall -Wextra -pedantic -Werror (gcc and g++, and clang when present).
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
if command -v clang >/dev/null 2>&1; then
    check clang -std=c11 "$tmp/use.c"
    check clang++ -std=c++17 -x c++ "$tmp/use.cpp"
fi
exit $fail
