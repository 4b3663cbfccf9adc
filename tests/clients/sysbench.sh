#!/usr/bin/env bash
# sysbench through the proxy: oltp_point_select, oltp_read_only and oltp_read_write, each with
# --db-ps-mode=auto (server-side prepared statements) and disable, a few seconds each; any
# error (sysbench stops at the first one it does not ignore, or counts ignored ones) fails.
#
# sysbench's default --auto-inc=on: prepare leaves `id` (the shard key, AUTO_INCREMENT) out
# of its INSERTs; through the proxy a sequence key_generator gives the ids (tests/clients.rs).
# oltp_read_write runs its transactions (BEGIN ... COMMIT, as sysbench does by default): each
# reads and writes rows on both shards, so shardproxy opens a branch on each node and
# commits them in two phases. It runs one thread: concurrent transactions updating,
# deleting and re-inserting the same random ids deadlock now and then on MariaDB directly
# too (sysbench counts those as ignored errors, and this check wants 0); across nodes the
# proxy breaks such deadlocks the same way (src/deadlock.rs). SB_SECONDS (default 3) sets
# each run's length.
set -euo pipefail

seconds=${SB_SECONDS:-3}
common=(--db-driver=mysql --mysql-host="$SP_HOST" --mysql-port="$SP_PORT" --mysql-user="$SP_USER"
    --mysql-password="$SP_PASSWORD" --mysql-db="$SP_DB" --tables=2 --table-size=500)
log=$SP_OUT/sysbench.$SP_TARGET.log
: >"$log"

sb() {
    echo "+ sysbench $*" >>"$log"
    sysbench "$@" >>"$log.last" 2>&1 || {
        cat "$log.last" >>"$log"
        echo "sysbench $* failed:" >&2
        tail -n 20 "$log.last" >&2
        rm -f "$log.last"
        exit 1
    }
    cat "$log.last" >>"$log"
}

rm -f "$log.last"
sysbench oltp_read_write "${common[@]}" cleanup >/dev/null 2>&1 || true
sb oltp_read_write "${common[@]}" prepare
echo "prepare: ok"
for test in oltp_point_select oltp_read_only oltp_read_write; do
    extra=(--threads=2)
    [[ $test == oltp_read_write ]] && extra=(--threads=1)
    for mode in auto disable; do
        rm -f "$log.last"
        sb "$test" "${common[@]}" "${extra[@]}" --db-ps-mode="$mode" --time="$seconds" \
            --report-interval=0 run
        errors=$(sed -n 's/^ *ignored errors: *\([0-9]*\).*/\1/p' "$log.last")
        queries=$(sed -n 's/^ *queries: *\([0-9]*\).*/\1/p' "$log.last")
        # "transactions: N (...)": BEGIN ... COMMIT units (read_write and read_only), or events.
        trx=$(sed -n 's/^ *transactions: *\([0-9]*\).*/\1/p' "$log.last")
        # "other" counts BEGIN and COMMIT: two per transaction of oltp_read_write.
        other=$(sed -n 's/^ *other: *\([0-9]*\).*/\1/p' "$log.last")
        if [[ $errors != 0 || -z $queries || $queries == 0 || -z $trx || $trx == 0 ]]; then
            echo "$test --db-ps-mode=$mode: ${errors:-no count of} errors, ${queries:-no} queries, ${trx:-no} transactions" >&2
            tail -n 30 "$log.last" >&2
            exit 1
        fi
        if [[ $test == oltp_read_write && $other != $((2 * trx)) ]]; then
            echo "$test --db-ps-mode=$mode: ${other:-no} BEGIN / COMMIT statements for $trx transactions (--skip-trx?)" >&2
            exit 1
        fi
        echo "$test --db-ps-mode=$mode: ok, 0 errors"
        echo "$test --db-ps-mode=$mode: $queries queries, $trx transactions" >&2
    done
done
rm -f "$log.last"
sb oltp_read_write "${common[@]}" cleanup
echo "cleanup: ok"
