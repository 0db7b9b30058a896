#!/usr/bin/env bash
# Builds the controller's image from the repository's Dockerfile on the local stand-in for
# its base (scripts/image/base.sh): the one difference from a user's build is
# --build-arg NODE_IMAGE. Needs a Docker daemon (scripts/image/docker.sh up).
#
# Usage:  build.sh [TAG]    TAG defaults to the chart's image (repository:appVersion of
#                           charts/fleet-mirror), so the chart's Pod names this build;
#                           prints TAG on the last line. Timings go to stderr.
# The daemon's build cache makes a rebuild of unchanged sources take seconds. The build
# stage is tagged too (fleet-mirror-build-stage:latest), so that its cache is not a
# dangling image; the images a rebuild replaces are removed by id (never a prune: the
# daemon may hold other people's images), so repeated builds do not fill the disk.
# One build.sh at a time per cache (flock on image/.build.lock): a concurrent one waits,
# then rebuilds from the daemon's cache in seconds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

log() { printf '[image] %s\n' "$*" >&2; }

tag="${1:-}"
if [[ -z $tag ]]; then
  repository="$(sed -n 's/^  repository: *//p' "$repo/charts/fleet-mirror/values.yaml" | head -n 1)"
  version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/charts/fleet-mirror/Chart.yaml")"
  [[ -n $repository && -n $version ]] || { log "error: no image repository or appVersion in charts/fleet-mirror"; exit 1; }
  tag="$repository:$version"
fi

cache="${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/image"
mkdir -p "$cache"
exec 7>"$cache/.build.lock"
flock 7

start=$SECONDS
base="$(bash "$here/base.sh" | tail -n 1)"
log "base $base ready in $((SECONDS - start))s"
stage=fleet-mirror-build-stage:latest
image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }
before=("$(image_id "$tag")" "$(image_id "$stage")")
start=$SECONDS
# Plain progress output: a CI log shows every step. The legacy builder of Debian's
# docker.io (or a CLI without buildx) prints a deprecation notice; the image is the same.
docker build --build-arg "NODE_IMAGE=$base" --target build --tag "$stage" "$repo" >&2
docker build --build-arg "NODE_IMAGE=$base" --tag "$tag" "$repo" >&2
log "built $tag in $((SECONDS - start))s"
after=("$(image_id "$tag")" "$(image_id "$stage")")
for old in "${before[@]}"; do
  if [[ -n $old && $old != "${after[0]}" && $old != "${after[1]}" ]]; then
    # Still used by a container (or another tag): left in place.
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
done
echo "$tag"
