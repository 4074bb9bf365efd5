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
    # with cleanups has it). clang's UBSan (-fsanitize=function) also emits the type_info of
    # function types as weak objects: read-only descriptors, no code. Nothing else may be weak.
    bad=$(nm -C --defined-only "$obj" |
          awk '$2 ~ /^[WwVvu]$/ && $3 != "DW.ref.__gxx_personality_v0" &&
               !($2 ~ /^[Vv]$/ && ($3 " " $4 == "typeinfo for" || $3 " " $4 " " $5 == "typeinfo name for")) { $1 = ""; print }')
    if [ -n "$bad" ]; then
        fail "$file defines weak/unique symbols (the linker may merge them with baseline copies):"
        echo "$bad" | head -20 | sed 's/^/    /'
    else
        pass
    fi

    stray=$(nm -C --defined-only "$obj" |
            awk '$2 ~ /^[A-Z]$/ && !($2 == "V" && ($3 " " $4 == "typeinfo for" || $3 " " $4 " " $5 == "typeinfo name for")) {
                     $1 = ""; $2 = ""; sub(/^ +/, ""); print }' |
            grep -v -E "^(ggml_cpu_register_([a-z0-9_]+_)?${isa}\(\)|DW\.ref\.__gxx_personality_v0)$" || true)
    if [ -n "$stray" ]; then
        fail "$file defines global symbols other than its registration function:"
        echo "$stray" | head -20 | sed 's/^/    /'
    else
        pass
    fi

    if objdump -h "$obj" | grep -q '\.init_array'; then
        # sanitizer module constructors live in .text.startup (gcc) or .text.asan.module_ctor and
        # .text.sancov.module_ctor* (clang); user initializers would be in .text.startup too
        if nm "$obj" | grep -q '__asan_init\|__ubsan_'; then
            sections=$(objdump -h "$obj" | awk '$2 ~ /^\.text\.(startup|asan\.module_ctor|sancov\.module_ctor.*)$/ { printf " -j %s", $2 }')
            # shellcheck disable=SC2086
            vec=$(objdump -d --no-show-raw-insn $sections "$obj" 2>/dev/null |
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
