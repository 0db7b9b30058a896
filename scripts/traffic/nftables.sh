#!/usr/bin/env bash
# Installs Debian's `nftables` (the `nft` command) when it is missing: kube-proxy's nftables
# mode runs it to write its rules, for the sandbox's traffic path (sandbox/traffic.ts: the
# traffic tests, the traffic bench and the demo's traffic line).
#
# Usage:  nftables.sh            install if missing and root; otherwise say why not and
#                                exit 0 (the traffic path then says it is skipped, and why)
#         nftables.sh --require  the same, but exit 1 when nft is still missing (CI)
#
# Only the package is installed: Debian ships its nftables.service disabled, so nothing
# loads /etc/nftables.conf (whose first line flushes every ruleset) and no rule changes.
set -euo pipefail

log() { printf '[nftables] %s\n' "$*" >&2; }
require=false
[[ ${1:-} == --require ]] && require=true

if command -v nft >/dev/null 2>&1 || [[ -x /usr/sbin/nft ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  log "nft is missing and this is not root: the traffic tests and the demo's traffic line will be skipped (as root: apt-get install nftables)"
  $require && exit 1
  exit 0
fi
log "installing Debian's nftables (kube-proxy's nftables mode needs the nft command)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq nftables >&2 || { apt-get update -qq >&2 && apt-get install -y -qq nftables >&2; }
/usr/sbin/nft --version >&2
