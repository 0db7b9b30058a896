#!/usr/bin/env bash
# Builds the pinned kube-apiserver and etcd from Go modules, once per machine.
#
# Output: prints the directory holding `kube-apiserver` and `etcd` on its last line.
# Cache:  ${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/control-plane/<k8s>_<etcd>/
#         A directory is only used once a build finished completely (a `.complete`
#         stamp is written last), so an interrupted build is redone, never half-used.
# Envtest convention: when KUBEBUILDER_ASSETS names a directory holding both
#         binaries, nothing is built and that directory is printed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[control-plane] %s\n' "$*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
  log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

cache_root="${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/control-plane"
out="$cache_root/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}"
if [[ -f "$out/.complete" && -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { log "error: Go is required to build the control plane (https://go.dev/doc/install)"; exit 1; }
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

work="$(mktemp -d "${TMPDIR:-/tmp}/fleet-mirror-cp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out.partial"

# --- kube-apiserver -------------------------------------------------------------
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging paths, which only exist inside its own repository. A wrapper module maps
# every staging module to the published version that matches the pin (v1.X.Y -> v0.X.Y).
staging_version="v0${KUBERNETES_VERSION#v1}"
log "resolving k8s.io/kubernetes@${KUBERNETES_VERSION} (staging modules at ${staging_version})"
k8s_mod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
[[ -f "$k8s_mod" ]] || { log "error: could not download k8s.io/kubernetes@${KUBERNETES_VERSION}"; exit 1; }

mkdir -p "$work/apiserver"
{
  echo "module fleetmirror.local/controlplane/apiserver"
  echo
  echo "go $(sed -n 's/^go //p' "$k8s_mod")"
  echo
  echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"${staging_version}"'#p' "$k8s_mod"
  echo ")"
} > "$work/apiserver/go.mod"
cat > "$work/apiserver/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
log "downloading kube-apiserver dependencies (first time: a few minutes)"
(cd "$work/apiserver" && go mod tidy -e >&2 && go mod download >&2)
log "building kube-apiserver ${KUBERNETES_VERSION} (first time: 5-15 minutes on 2 cores)"
start=$SECONDS
(cd "$work/apiserver" && go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION}" -o "$out.partial/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2)
log "kube-apiserver built in $((SECONDS - start))s"

# --- etcd -------------------------------------------------------------------------
# etcd's own main package is a one-line call into server/v3/etcdmain; build the same.
mkdir -p "$work/etcd"
cat > "$work/etcd/go.mod" <<MOD
module fleetmirror.local/controlplane/etcd

go 1.24

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
MOD
cat > "$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
log "building etcd ${ETCD_VERSION}"
start=$SECONDS
(cd "$work/etcd" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "$out.partial/etcd" . >&2)
log "etcd built in $((SECONDS - start))s"

"$out.partial/kube-apiserver" --version >&2
"$out.partial/etcd" --version | head -1 >&2
rm -rf "$out"
mv "$out.partial" "$out"
touch "$out/.complete"
log "done: $out"
echo "$out"
