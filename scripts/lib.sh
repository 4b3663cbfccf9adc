# shellcheck shell=bash
# Shell helpers shared by scripts/ and bench/ (sourced, not run). The sourcing script defines
# die().

# True when process $1 exists and is not a zombie.
proc_alive() {
    local pid=$1 stat
    kill -0 "$pid" 2>/dev/null || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# Stops process $1: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_pid() {
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        proc_alive "$pid" || return 0
        sleep 0.1
    done
    echo "${0##*/}: pid $pid still alive after 10s, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

# apt-get install of the packages named, with sudo when not root.
install_packages() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "missing $*, and sudo is not available to install them"
        sudo=(sudo)
    fi
    echo "${0##*/}: installing $* with apt-get"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}
