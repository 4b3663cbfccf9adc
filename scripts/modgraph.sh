#!/bin/sh
# The graph of shardproxy's top-level modules: for each module of src/ (src/X.rs or src/X/),
# the other top-level modules its code names through `crate::X` (in `use` lines, `use
# crate::{X, Y}` groups and inline paths; comments left out). Exits 1, naming the modules, if
# the graph has a cycle.
#
#   scripts/modgraph.sh
set -eu
cd "$(dirname "$0")/../src"
mods=$(ls | sed -n 's/\.rs$//p; /^[a-z_]*$/p' | grep -vx -e lib -e main | sort -u)
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for m in $mods; do
    files=$( { [ -f "$m.rs" ] && echo "$m.rs"; [ -d "$m" ] && find "$m" -name '*.rs'; } || true)
    # Code without `//` comments, joined into one line so `use crate::{...}` groups match.
    code=$(cat $files | sed 's|//.*||' | tr '\n' ' ')
    deps=$( {
        printf '%s' "$code" | grep -o 'crate::[a-z_][a-z0-9_]*' | sed 's/^crate:://' || true
        printf '%s' "$code" | grep -o 'crate::{[^}]*}' | sed 's/^crate::{//; s/}$//' \
            | tr ',' '\n' | sed 's/^ *//; s/[: ].*//' || true
    } | grep -x "$(echo $mods | tr ' ' '\n' | paste -sd'|' | sed 's/|/\\|/g')" | grep -vx "$m" | sort -u)
    echo "$m -> $(echo $deps)"
    for d in $deps; do echo "$m $d" >>"$edges"; done
    echo "$m $m" >>"$edges"
done
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
    echo "cycle:" >&2
    grep -v 'input contains a loop' "$edges.err" | sed 's/^tsort: /  /' >&2
    rm -f "$edges.err"
    exit 1
fi
rm -f "$edges.err"
echo "no cycles"
