#!/bin/sh
# The module graph of shardproxy's sources, checked (tests/layout.rs): prints which
# top-level module names which, and fails naming the files of any circle between files of
# different folders, any circle inside a folder the README's "Layout" does not explain, a
# circle between top-level modules, or a source file over 1,000 lines. CI runs the same
# test with the rest of the suite.
#
#   scripts/modgraph.sh
set -eu
cd "$(dirname "$0")/.."
exec cargo test --quiet --test layout -- --nocapture --test-threads 1
