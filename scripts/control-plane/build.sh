#!/usr/bin/env bash
# Builds the pinned kube-apiserver, etcd, kubectl, kube-controller-manager, kube-proxy,
# CoreDNS and KWOK from Go modules, once per machine.
#
# Usage:  build.sh            everything; prints the directory holding `kube-apiserver`
#                             and `etcd` on its last line.
#         build.sh kubectl    kubectl only; prints the directory holding `kubectl`.
#         build.sh kube-controller-manager | kube-proxy | coredns
#                             that binary only; prints the directory holding it.
#                             (kube-proxy: the traffic tests, the demo's traffic line and
#                             the traffic bench run it, as root; sandbox/traffic.ts.)
#         build.sh mcs-crds   the MCS API's CRD manifests (sigs.k8s.io/mcs-api, config/crd);
#                             prints the directory holding them. Nothing is compiled.
#         build.sh promtool   Prometheus's promtool only (checks metrics, rules and queries);
#                             prints the directory holding it. Not part of `all`.
#         build.sh monitoring-crds
#                             the Prometheus Operator's ServiceMonitor and PrometheusRule
#                             CRD manifests (github.com/prometheus-operator/prometheus-operator,
#                             example/prometheus-operator-crd); prints their directory.
#                             Nothing is compiled.
#         build.sh kubelet    kubelet only; prints the directory holding it. Not part of
#                             `all`: only the real-node experiment (DESIGN §6) runs it.
#         build.sh helm       helm (helm.sh/helm/v4) only; prints the directory holding
#                             `helm`. The chart test renders and lints with it. Not part of
#                             `all`: the sandbox does not need it.
#         build.sh kwok       KWOK (sigs.k8s.io/kwok), the fake kubelet that makes the
#                             sandbox's Pods Running with an IP without a container runtime,
#                             and the module's own pod and node Stages it runs with; prints
#                             the directory holding `kwok`.
# Cache:  ${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/control-plane/
#           k8s-<k8s>_etcd-<etcd>/          kube-apiserver, etcd
#           kubectl-<k8s>/                  kubectl
#           kube-controller-manager-<k8s>/  kube-controller-manager
#           kube-proxy-<k8s>/               kube-proxy
#           kubelet-<k8s>/                  kubelet
#           coredns-<coredns>+hosts/        coredns (only the plugins the sandbox uses; the
#                                           directory before `hosts` joined was coredns-<coredns>/)
#           mcs-api-<mcs>/                  multicluster.x-k8s.io_service{exports,imports}.yaml
#           promtool-<prometheus>/          promtool
#           helm-<helm>/                    helm
#           monitoring-crds-<operator>/     monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml
#           kwok-<kwok>/                    kwok
#           kwok-stages-<kwok>/             node/fast/node-initialize.yaml, pod/fast/pod-{ready,complete,delete}.yaml
#         Each binary added later got its own directory and stamp, so adding it left the
#         existing caches valid: nothing already built is rebuilt.
#         A directory is only used once a build finished completely (a `.complete`
#         stamp is written last), so an interrupted build is redone, never half-used.
# Envtest convention: when KUBEBUILDER_ASSETS names a directory holding the binaries
#         (envtest ships kube-apiserver, etcd and kubectl), nothing is built and that
#         directory is used.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[control-plane] %s\n' "$*" >&2; }

case "${1:-all}" in
  all | kubectl | kube-controller-manager | kube-proxy | kubelet | coredns | mcs-crds | monitoring-crds | helm | promtool | kwok) what="${1:-all}" ;;
  *) log "usage: build.sh [kubectl | kube-controller-manager | kube-proxy | kubelet | coredns | mcs-crds | monitoring-crds | helm | promtool | kwok]"; exit 2 ;;
esac

cache_root="${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/control-plane"
# One build of a target at a time per cache: a second caller (`.ci/run` builds helm and
# promtool in the background while `npm test` builds the rest, then asks for them too)
# waits for the first, then finds its stamp. Targets are disjoint, so builds of two
# targets run side by side.
mkdir -p "$cache_root"
exec 8>"$cache_root/.build-$what.lock"
if ! flock -n 8; then
  log "waiting for another build of $what (lock $cache_root/.build-$what.lock)"
  flock 8
fi
work=""
cleanup() { if [[ -n "$work" ]]; then rm -rf "$work"; fi; }
trap cleanup EXIT

# prepare_go WHAT: checks for Go (WHAT names the binaries that need it) and makes the
# temporary work directory, once.
prepare_go() {
  [[ -n "$work" ]] && return 0
  command -v go >/dev/null || {
    log "error: Go is required to build $1 (https://go.dev/doc/install), or put $1 in KUBEBUILDER_ASSETS"
    exit 1
  }
  export GOFLAGS="${GOFLAGS:-} -mod=mod"
  export CGO_ENABLED=0
  work="$(mktemp -d "${TMPDIR:-/tmp}/fleet-mirror-cp.XXXXXX")"
}

# k8s_wrapper_module DIR PACKAGE: a module in DIR that requires k8s.io/kubernetes at the
# pin and imports PACKAGE (one of its commands).
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging paths, which only exist inside its own repository. The wrapper maps every
# staging module to the published version that matches the pin (v1.X.Y -> v0.X.Y).
k8s_wrapper_module() {
  local dir="$1" package="$2"
  local staging_version="v0${KUBERNETES_VERSION#v1}"
  log "resolving k8s.io/kubernetes@${KUBERNETES_VERSION} (staging modules at ${staging_version})"
  local k8s_mod
  k8s_mod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  [[ -f "$k8s_mod" ]] || { log "error: could not download k8s.io/kubernetes@${KUBERNETES_VERSION}"; exit 1; }
  mkdir -p "$dir"
  {
    echo "module fleetmirror.local/controlplane/$(basename "$dir")"
    echo
    echo "go $(sed -n 's/^go //p' "$k8s_mod")"
    echo
    echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"${staging_version}"'#p' "$k8s_mod"
    echo ")"
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<GO
//go:build tools

package tools

import _ "${package}"
GO
  log "downloading $(basename "$package") dependencies (first time: a few minutes)"
  (cd "$dir" && go mod tidy -e >&2 && go mod download >&2)
}

# k8s_build DIR PACKAGE OUTPUT: builds PACKAGE in the wrapper module DIR, stamped with
# the pinned version (what `--version` / `kubectl version --client` print).
k8s_build() {
  local dir="$1" package="$2" output="$3"
  (cd "$dir" && go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION}" -o "$output" "$package" >&2)
}

# Sets control_plane_dir to a directory holding kube-apiserver and etcd, building them
# into the cache if needed.
ensure_control_plane() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    control_plane_dir="$KUBEBUILDER_ASSETS"
    return 0
  fi
  local out="$cache_root/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}"
  if [[ -f "$out/.complete" && -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
    log "cached: $out"
    control_plane_dir="$out"
    return 0
  fi
  prepare_go "kube-apiserver and etcd"
  rm -rf "$out.partial"
  mkdir -p "$out.partial"

  # --- kube-apiserver -----------------------------------------------------------
  k8s_wrapper_module "$work/apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  log "building kube-apiserver ${KUBERNETES_VERSION} (first time: 5-15 minutes on 2 cores)"
  local start=$SECONDS
  k8s_build "$work/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$out.partial/kube-apiserver"
  log "kube-apiserver built in $((SECONDS - start))s"

  # --- etcd ---------------------------------------------------------------------
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
  control_plane_dir="$out"
}

# Sets kubectl_dir to a directory holding kubectl at the pinned Kubernetes version (the
# deploy test applies deploy/ with it; its built-in kustomize renders the bases).
ensure_kubectl() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kubectl" ]]; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS for kubectl"
    kubectl_dir="$KUBEBUILDER_ASSETS"
    return 0
  fi
  local out="$cache_root/kubectl-${KUBERNETES_VERSION}"
  if [[ -f "$out/.complete" && -x "$out/kubectl" ]]; then
    log "cached: $out"
    kubectl_dir="$out"
    return 0
  fi
  prepare_go kubectl
  # k8s.io/kubernetes/cmd/kubectl is a thin main over the k8s.io/kubectl staging module,
  # which the wrapper module maps to its published version like the others.
  k8s_wrapper_module "$work/kubectl" k8s.io/kubernetes/cmd/kubectl
  log "building kubectl ${KUBERNETES_VERSION} (first time: a few minutes on 2 cores)"
  local start=$SECONDS
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  k8s_build "$work/kubectl" k8s.io/kubernetes/cmd/kubectl "$out.partial/kubectl"
  log "kubectl built in $((SECONDS - start))s"
  "$out.partial/kubectl" version --client >&2
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done: $out"
  kubectl_dir="$out"
}

# ensure_k8s_command NAME: sets k8s_command_dir to a directory holding NAME, the command
# k8s.io/kubernetes/cmd/NAME at the pinned Kubernetes version: from KUBEBUILDER_ASSETS when
# it holds one, else from the cache's NAME-<k8s>/ (built there if missing). Such a command's
# package graph is mostly kube-apiserver's, so after that build most of it comes from Go's
# cache (kube-controller-manager 2.4 min, kube-proxy 140 s on 2 cores).
ensure_k8s_command() {
  local name="$1"
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$name" ]]; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS for $name"
    k8s_command_dir="$KUBEBUILDER_ASSETS"
    return 0
  fi
  local out="$cache_root/${name}-${KUBERNETES_VERSION}"
  if [[ -f "$out/.complete" && -x "$out/$name" ]]; then
    log "cached: $out"
    k8s_command_dir="$out"
    return 0
  fi
  prepare_go "$name"
  k8s_wrapper_module "$work/$name" "k8s.io/kubernetes/cmd/$name"
  log "building $name ${KUBERNETES_VERSION} (first time: a few minutes on 2 cores)"
  local start=$SECONDS
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  k8s_build "$work/$name" "k8s.io/kubernetes/cmd/$name" "$out.partial/$name"
  log "$name built in $((SECONDS - start))s"
  "$out.partial/$name" --version >&2
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done: $out"
  k8s_command_dir="$out"
}

# Sets controller_manager_dir to a directory holding kube-controller-manager. The sandbox
# runs only its EndpointSlice, EndpointSliceMirroring, namespace and garbage-collector
# controllers, but the command links them all.
ensure_controller_manager() {
  ensure_k8s_command kube-controller-manager
  controller_manager_dir="$k8s_command_dir"
}

# Sets kube_proxy_dir to a directory holding kube-proxy. The sandbox runs it in nftables
# mode for the traffic path (sandbox/kube-proxy.ts): it turns the local cluster's Services
# and EndpointSlices into DNAT rules, as on a node.
ensure_kube_proxy() {
  ensure_k8s_command kube-proxy
  kube_proxy_dir="$k8s_command_dir"
}

# require_module DIR MODULE VERSION: a wrapper module in DIR that requires MODULE at
# VERSION, at MODULE's own `go` version (for a module whose go.mod needs no replace lines).
require_module() {
  local dir="$1" module="$2" version="$3"
  local go_mod
  go_mod="$(go mod download -json "${module}@${version}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  [[ -f "$go_mod" ]] || { log "error: could not download ${module}@${version}"; exit 1; }
  mkdir -p "$dir"
  printf 'module fleetmirror.local/controlplane/%s\n\ngo %s\n\nrequire %s %s\n' \
    "$(basename "$dir")" "$(sed -n 's/^go //p' "$go_mod")" "$module" "$version" > "$dir/go.mod"
}

# build_go_command NAME MODULE VERSION PACKAGE OUT VERSION_FLAG [go build flags…]: builds
# PACKAGE (a command of MODULE at VERSION) in a wrapper module whose tools.go imports it,
# so `go mod tidy` resolves exactly that command's dependency graph at the module's own
# versions, into OUT/NAME; checks it runs (`NAME VERSION_FLAG`) and stamps OUT complete.
# Nothing is built when OUT is complete already.
build_go_command() {
  local name="$1" module="$2" version="$3" package="$4" out="$5" version_flag="$6"
  shift 6
  if [[ -f "$out/.complete" && -x "$out/$name" ]]; then
    log "cached: $out"
    return 0
  fi
  prepare_go "$name"
  require_module "$work/$name" "$module" "$version"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$package" > "$work/$name/tools.go"
  log "downloading $name dependencies (first time: a few minutes)"
  (cd "$work/$name" && go mod tidy -e >&2)
  log "building $name ${version} (first time: a few minutes on 2 cores)"
  local start=$SECONDS
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  (cd "$work/$name" && go build -trimpath "$@" -o "$out.partial/$name" "$package" >&2)
  log "$name built in $((SECONDS - start))s"
  "$out.partial/$name" "$version_flag" >&2
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done: $out"
}

# Sets coredns_dir to a directory holding a CoreDNS at the pinned version, linked with only
# the plugins the sandbox's Corefile uses (a full CoreDNS links every cloud DNS SDK and
# takes several times longer to build). The main package is CoreDNS's own (coremain.Run)
# with the directive list cut to those plugins, in CoreDNS's own order.
# `hosts` (in CoreDNS's own module, no new dependency) serves `clusterset.local` for the
# traffic tests: CoreDNS's `multicluster` plugin, which serves it from ServiceImports in a
# real cluster, is not a module these machines can fetch, so the sandbox writes the
# ServiceImports' spec.ips to a hosts file instead (sandbox/clusterset-dns.ts). The plugin
# set is in the directory's name: a CoreDNS cached without `hosts` is never used.
ensure_coredns() {
  local out="$cache_root/coredns-${COREDNS_VERSION}+hosts"
  if [[ -f "$out/.complete" && -x "$out/coredns" ]]; then
    log "cached: $out"
    coredns_dir="$out"
    return 0
  fi
  prepare_go coredns
  require_module "$work/coredns" github.com/coredns/coredns "$COREDNS_VERSION"
  cat > "$work/coredns/main.go" <<'GO'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	// The order plugins run in; it must follow CoreDNS's own directive order.
	dnsserver.Directives = []string{"bind", "ready", "errors", "log", "hosts", "kubernetes"}
	coremain.Run()
}
GO
  log "building coredns ${COREDNS_VERSION} (kubernetes, hosts, bind, ready, errors, log plugins)"
  local start=$SECONDS
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  (cd "$work/coredns" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "$out.partial/coredns" . >&2)
  log "coredns built in $((SECONDS - start))s"
  "$out.partial/coredns" -version >&2
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done: $out"
  coredns_dir="$out"
}

# copy_module_files OUT MODULE VERSION DIR FILE...: copies FILEs from DIR of the Go
# module MODULE@VERSION, as `go mod download` verified it against the checksum database,
# into OUT (stamped complete), unless OUT is complete already. Nothing is compiled.
copy_module_files() {
  local out="$1" module="$2" version="$3" dir="$4"
  shift 4
  if [[ -f "$out/.complete" ]]; then
    log "cached: $out"
    return 0
  fi
  prepare_go "files of $module"
  local module_dir
  module_dir="$(go mod download -json "${module}@${version}" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  [[ -d "$module_dir/$dir" ]] || { log "error: could not download ${module}@${version}"; exit 1; }
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  local file
  for file in "$@"; do
    [[ -f "$module_dir/$dir/$file" ]] || { log "error: ${module}@${version} has no $dir/$file"; exit 1; }
    mkdir -p "$(dirname "$out.partial/$file")"
    cp "$module_dir/$dir/$file" "$out.partial/$file"
  done
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done: $out"
}

# Sets mcs_crds_dir to a directory holding the CRD manifests of the pinned
# sigs.k8s.io/mcs-api module (ServiceExport, ServiceImport), copied from the module's
# config/crd as `go mod download` verified them against the checksum database. The
# sandbox applies them to the clusters a test names (sandbox/mcs-crds.ts).
ensure_mcs_crds() {
  mcs_crds_dir="$cache_root/mcs-api-${MCS_API_VERSION}"
  copy_module_files "$mcs_crds_dir" sigs.k8s.io/mcs-api "$MCS_API_VERSION" config/crd \
    multicluster.x-k8s.io_serviceexports.yaml multicluster.x-k8s.io_serviceimports.yaml
}

# Sets helm_dir to a directory holding helm at the pinned version, built from the
# helm.sh/helm/v4 module's own command in a wrapper module (its go.mod has no replace
# directives, so requiring it at the pin gives helm's own dependency versions). The
# version is stamped as helm's Makefile does, so `helm version` prints the pin.
ensure_helm() {
  local out="$cache_root/helm-${HELM_VERSION}"
  build_go_command helm helm.sh/helm/v4 "$HELM_VERSION" helm.sh/helm/v4/cmd/helm "$out" version \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  helm_dir="$out"
}

# Sets monitoring_crds_dir to a directory holding the ServiceMonitor and PrometheusRule CRD
# manifests of the pinned Prometheus Operator module, as `go mod download` verified them.
# The chart's test applies its ServiceMonitor to a sandbox API server that knows them.
ensure_monitoring_crds() {
  monitoring_crds_dir="$cache_root/monitoring-crds-${PROMETHEUS_OPERATOR_VERSION}"
  copy_module_files "$monitoring_crds_dir" github.com/prometheus-operator/prometheus-operator \
    "$PROMETHEUS_OPERATOR_VERSION" example/prometheus-operator-crd \
    monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml
}

# Sets promtool_dir to a directory holding promtool from the pinned Prometheus Go module
# (github.com/prometheus/prometheus publishes Prometheus 3.X.Y as v0.3XX.Y). The monitoring
# tests judge /metrics, the alert rules and the dashboard's queries with it. The wrapper
# module imports the command so `go mod tidy` resolves exactly its dependency graph.
# Built with Prometheus's own `remove_all_sd` tag: no service-discovery plugin (every cloud
# SDK), which only `promtool check config`/`sd` need and the tests never run; `check
# metrics`, `check rules` and `test rules` are the same code either way.
ensure_promtool() {
  local out="$cache_root/promtool-${PROMETHEUS_VERSION}"
  # v0.3XX.Y -> 3.XX.Y, the release `promtool --version` reports.
  local release="${PROMETHEUS_VERSION#v0.}"
  release="${release:0:1}.${release:1}"
  build_go_command promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
    github.com/prometheus/prometheus/cmd/promtool "$out" --version \
    -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=${release}"
  promtool_dir="$out"
}

# Sets kwok_dir to a directory holding kwok at the pinned version, built from the module's
# own command in a wrapper module (its go.mod has no replace directives), and copies the
# module's "fast" node and pod Stages (kustomize/stage) into kwok-stages-<v>/, as `go mod
# download` verified them: kwok runs no lifecycle without Stages, and these are the ones
# kwokctl gives its clusters (a node Ready at once; a pod Running with an IP at once,
# Succeeded when a Job owns it, gone once deleted). The sandbox starts it (sandbox/kwok.ts).
ensure_kwok() {
  local out="$cache_root/kwok-${KWOK_VERSION}"
  build_go_command kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "$out" --version \
    -ldflags "-s -w"
  copy_module_files "$cache_root/kwok-stages-${KWOK_VERSION}" sigs.k8s.io/kwok "$KWOK_VERSION" kustomize/stage \
    node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
  kwok_dir="$out"
}

control_plane_dir=""
kubectl_dir=""
kwok_dir=""
monitoring_crds_dir=""
helm_dir=""
mcs_crds_dir=""
controller_manager_dir=""
kube_proxy_dir=""
k8s_command_dir=""
coredns_dir=""
promtool_dir=""
case "$what" in
  kubectl)
    ensure_kubectl
    echo "$kubectl_dir"
    ;;
  kube-controller-manager)
    ensure_controller_manager
    echo "$controller_manager_dir"
    ;;
  kube-proxy)
    ensure_kube_proxy
    echo "$kube_proxy_dir"
    ;;
  kubelet)
    ensure_k8s_command kubelet
    echo "$k8s_command_dir"
    ;;
  coredns)
    ensure_coredns
    echo "$coredns_dir"
    ;;
  mcs-crds)
    ensure_mcs_crds
    echo "$mcs_crds_dir"
    ;;
  promtool)
    ensure_promtool
    echo "$promtool_dir"
    ;;
  monitoring-crds)
    ensure_monitoring_crds
    echo "$monitoring_crds_dir"
    ;;
  helm)
    ensure_helm
    echo "$helm_dir"
    ;;
  kwok)
    ensure_kwok
    echo "$kwok_dir"
    ;;
  all)
    ensure_control_plane
    ensure_kubectl
    ensure_controller_manager
    ensure_kube_proxy
    ensure_coredns
    ensure_mcs_crds
    ensure_kwok
    echo "$control_plane_dir"
    ;;
esac
