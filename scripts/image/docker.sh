#!/usr/bin/env bash
# A Docker daemon for building and running the controller's image on a build machine.
#
# Usage:  docker.sh up HOLDER      installs Debian's docker.io when there is no dockerd,
#                                  starts dockerd when no daemon answers on its socket,
#                                  and registers HOLDER (a process id that uses the
#                                  daemon until it exits or calls `down`). Prints
#                                  `started` (this call started the daemon) or `running`.
#         docker.sh down HOLDER    unregisters HOLDER; when a `docker.sh up` started the
#                                  daemon and no registered holder is alive any more,
#                                  stops that daemon (SIGTERM, then waits for it to exit).
#                                  A daemon someone else started is never stopped.
#         docker.sh install        installs docker.io only (when dockerd is missing).
#
# Holders, not a single owner: the machine is shared, so `.ci/run` and a test it runs (or
# two CI runs side by side) may both ask for the daemon; the last one out stops the daemon
# fleet-mirror started, and no one stops it while another holder still builds or runs.
# State: ${FLEET_MIRROR_DOCKER_STATE:-/run/fleet-mirror-docker}/ (volatile, as the daemon
#   is): dockerd.pid (only for a daemon started here), holders/<pid>, dockerd.log, and a
#   lock file every command takes with flock, so `up` and `down` never interleave.
# Needs root to install the package and to start dockerd; without root it only uses a
# daemon that already answers, and fails with the reason otherwise.
set -euo pipefail

log() { printf '[docker] %s\n' "$*" >&2; }

state="${FLEET_MIRROR_DOCKER_STATE:-/run/fleet-mirror-docker}"
socket="/var/run/docker.sock"

usage() { log "usage: docker.sh up HOLDER_PID | down HOLDER_PID | install"; exit 2; }

# The daemon answers on its socket (any client version: the CLI negotiates the API version).
answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

alive() { kill -0 "$1" 2>/dev/null; }

install_docker() {
  if command -v dockerd >/dev/null; then return 0; fi
  if [[ $(id -u) -ne 0 ]]; then
    log "error: dockerd is missing and installing Debian's docker.io needs root"
    exit 1
  fi
  log "installing Debian's docker.io (dockerd, containerd, runc)"
  export DEBIAN_FRONTEND=noninteractive
  # No service may start during the install: the daemon is started below, recorded, and
  # stopped by `down`. policy-rc.d is Debian's switch for that; one already there is kept.
  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  local status=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io; } >&2 || status=$?
  if [[ -n $made_policy ]]; then rm -f "$policy"; fi
  if [[ $status -ne 0 ]]; then
    log "error: apt-get install docker.io failed (exit $status)"
    exit "$status"
  fi
  # The package's CLI is /usr/bin/docker; a docker already on PATH is used as found.
  command -v docker >/dev/null || { log "error: docker.io installed no docker CLI"; exit 1; }
}

start_dockerd() {
  if [[ $(id -u) -ne 0 ]]; then
    log "error: no Docker daemon answers on $socket and starting dockerd needs root"
    exit 1
  fi
  log "starting dockerd (log: $state/dockerd.log)"
  # setsid: the daemon outlives this script and is not in the caller's process group, so a
  # Ctrl-C in the CI's terminal reaches the caller, whose `down` stops the daemon in order.
  # 7-9>&-: the daemon must inherit no lock's descriptor (this one's, or the image scripts'
  # when they call it), or it would hold that lock for as long as it runs.
  setsid dockerd --host "unix://$socket" --pidfile "$state/dockerd.pid" \
    >"$state/dockerd.log" 2>&1 < /dev/null 7>&- 8>&- 9>&- &
  local pid=$! waited=0
  until answers; do
    if ! alive "$pid"; then
      log "error: dockerd exited while starting; its log:"
      tail -n 30 "$state/dockerd.log" >&2
      rm -f "$state/dockerd.pid"
      exit 1
    fi
    if ((waited >= 120)); then
      log "error: dockerd did not answer within 60 s; stopping it"
      kill "$pid" 2>/dev/null || true
      exit 1
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  # dockerd writes its own pidfile; the pid this script started is the one recorded.
  echo "$pid" > "$state/dockerd.pid"
  log "dockerd $(docker version --format '{{.Server.Version}}') up (pid $pid)"
}

stop_dockerd() {
  local pid
  pid="$(cat "$state/dockerd.pid")"
  if ! alive "$pid" || [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]]; then
    log "the dockerd started here (pid $pid) is gone already"
    rm -f "$state/dockerd.pid"
    return 0
  fi
  log "stopping the dockerd started here (pid $pid)"
  kill -TERM "$pid"
  local waited=0
  while alive "$pid"; do
    # dockerd stops its containers (10 s each by default) and its own containerd first.
    if ((waited >= 120)); then
      log "error: dockerd (pid $pid) still running 60 s after SIGTERM; left running"
      return 1
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  rm -f "$state/dockerd.pid"
  log "dockerd stopped"
}

live_holders() {
  local file count=0
  for file in "$state"/holders/*; do
    [[ -e $file ]] || continue
    if alive "$(basename "$file")"; then count=$((count + 1)); else rm -f "$file"; fi
  done
  echo "$count"
}

command="${1:-}"
case "$command" in
  install) install_docker; exit 0 ;;
  up | down) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; holder="$2" ;;
  *) usage ;;
esac

mkdir -p "$state/holders"
exec 9>"$state/lock"
flock 9

if [[ $command == up ]]; then
  install_docker
  if answers; then
    echo running
  else
    # A pidfile left by a daemon that died (or a reboot that kept /run) is stale.
    rm -f "$state/dockerd.pid"
    start_dockerd
    echo started
  fi
  touch "$state/holders/$holder"
  exit 0
fi

rm -f "$state/holders/$holder"
if [[ ! -f "$state/dockerd.pid" ]]; then
  exit 0
fi
left="$(live_holders)"
if ((left > 0)); then
  log "dockerd left running: $left other holder(s) use it"
  exit 0
fi
stop_dockerd
