#!/usr/bin/env bash
# Checks the object files of the per-ISA kernel folders (ggml/src/cpu/<isa>/) for the ways code
# compiled with an instruction set could run before, or instead of, the CPU check:
#  - a weak or unique symbol (an inline function, template or static-local guard): the linker
#    keeps one copy for every caller, possibly this folder's, so baseline code would run it;
#  - a global symbol other than the folder's registration functions (ggml_cpu_register_*_<isa>);
#  - a static initializer: anything in .init_array. Sanitizer builds add one per file (the
#    instrumentation's module constructor); there it must not contain a VEX/EVEX instruction.
# Usage: symbols.sh <file listing the object files, one per line>
set -u
NAME=isa-symbols
source "$(dirname "$0")/../tools/lib/check.sh"

list="${1:?usage: symbols.sh <object list file>}"
[ -s "$list" ] || { echo "FAIL: no object list at $list"; exit 1; }
command -v nm >/dev/null && command -v objdump >/dev/null || { echo "FAIL: nm/objdump (binutils) missing"; exit 1; }

n_obj=0
while IFS= read -r obj; do
    [ -n "$obj" ] || continue
    [ -f "$obj" ] || { fail "$obj: not built"; continue; }
    n_obj=$((n_obj + 1))
    # the folder name is the ISA: .../src/cpu/<isa>/<file>.cpp.o
    isa=$(basename "$(dirname "$obj")")
    file="$isa/$(basename "$obj" .o)"

    # DW.ref.__gxx_personality_v0 is the exception personality pointer (data, every C++ file
    # with cleanups has it): the only weak symbol allowed.
    bad=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[WwVvu]$/ && $3 != "DW.ref.__gxx_personality_v0" { $1 = ""; print }')
    if [ -n "$bad" ]; then
        fail "$file defines weak/unique symbols (the linker may merge them with baseline copies):"
        echo "$bad" | head -20 | sed 's/^/    /'
    else
        pass
    fi

    stray=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[A-Z]$/ { $1 = ""; $2 = ""; sub(/^ +/, ""); print }' |
            grep -v -E "^(ggml_cpu_register_([a-z0-9_]+_)?${isa}\(\)|DW\.ref\.__gxx_personality_v0)$" || true)
    if [ -n "$stray" ]; then
        fail "$file defines global symbols other than its registration function:"
        echo "$stray" | head -20 | sed 's/^/    /'
    else
        pass
    fi

    if objdump -h "$obj" | grep -q '\.init_array'; then
        # sanitizer module constructors live in .text.startup; user initializers would too
        if nm "$obj" | grep -q '__asan_init\|__ubsan_'; then
            vec=$(objdump -d --no-show-raw-insn -j .text.startup "$obj" 2>/dev/null |
                  grep -E '^\s+[0-9a-f]+:\s+v[a-z]|%[yz]mm|%k[0-7]' || true)
            if [ -n "$vec" ]; then
                fail "$file: start-up code (runs at library load) uses VEX/EVEX instructions:"
                echo "$vec" | head -10 | sed 's/^/    /'
            else
                pass
            fi
        else
            fail "$file has a static initializer (.init_array): it would run before the CPU check"
        fi
    else
        pass
    fi
done < "$list"

[ "$n_obj" -gt 0 ] || fail "the object list $list names no object"
finish
