#!/usr/bin/env bash
# The local stand-in for the official node:<version>-bookworm-slim image, for machines that
# reach no container registry (only Debian's mirrors and the package registries): the same
# contents, built from their sources.
#
#   - Debian <suite> from debootstrap's minbase variant (Essential + apt, as debian:*-slim),
#     from the apt mirror this machine uses, slimmed as debian:*-slim is (no docs but the
#     copyright files, no man pages, locales or apt lists, and dpkg told to keep it so);
#   - user and group `node` (1000:1000) with a home directory, as the official image;
#   - the Node binary of the npm package node-linux-<arch> at the version package-lock.json
#     pins for the `node` package (the package that downloads that same binary in its
#     install script), in /usr/local as the official image unpacks nodejs.org's tarball;
#   - npm (the version that Node bundles, checked against Node's CHANGELOG) and yarn
#     classic from the npm registry, linked in /usr/local/bin as in the official image;
#   - the host's CA bundle at Debian's standard path with NODE_EXTRA_CA_CERTS naming it:
#     these machines reach the registries through a proxy whose CA only the host trusts,
#     so `npm ci` in a build on this base fails with SELF_SIGNED_CERT_IN_CHAIN without it.
#     The official image has no CA bundle (Node carries its own roots): the one addition.
#
# Usage:  base.sh           the image, imported into the Docker daemon when it lacks it;
#                           prints its tag (fleet-mirror-base/node:<node>-npm<npm>-<suite>-slim)
#                           on the last line. Needs a daemon (scripts/image/docker.sh up).
#         base.sh rootfs    the cached root filesystem only (no daemon needed); prints its
#                           directory. Needs root (debootstrap), npm and the network.
# Cache:  ${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/image/
#           base-node-<node>_npm-<npm>_<suite>-r<revision>/rootfs.tar   (+ .complete, versions)
#         written once per machine and pin set; a directory without `.complete` (an
#         interrupted build) is rebuilt, never used. The daemon's copy carries labels naming
#         the cache key and the CA bundle's hash: it is imported again when either differs.
#         One base.sh at a time per cache (flock on image/.base.lock): a second one (another
#         CI run, or the test while .ci/run builds in the background) waits, then finds it built.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[image-base] %s\n' "$*" >&2; }

case "${1:-image}" in
  image | rootfs) what="${1:-image}" ;;
  *) log "usage: base.sh [rootfs]"; exit 2 ;;
esac

# The `node` package's version in package-lock.json: the Node of every npm script.
node_version="$(sed -n '/"node_modules\/node": {/,/}/ s/.*"version": "\([0-9.]*\)".*/\1/p' "$repo/package-lock.json" | head -n 1)"
[[ -n $node_version ]] || { log "error: package-lock.json pins no version of the node package"; exit 1; }

deb_arch="$(dpkg --print-architecture)"
case "$deb_arch" in
  amd64) node_arch=x64 openssl_arch=linux-x86_64 ;;
  arm64) node_arch=arm64 openssl_arch=linux-aarch64 ;;
  *) log "error: no Node binary package for Debian architecture $deb_arch"; exit 1 ;;
esac

key="node-${node_version}_npm-${NPM_VERSION}_${DEBIAN_SUITE}-r${BASE_REVISION}"
out="${FLEET_MIRROR_CACHE:-$HOME/.cache/fleet-mirror}/image/base-$key"
tag="fleet-mirror-base/node:${node_version}-npm${NPM_VERSION}-${DEBIAN_SUITE}-slim"
ca_bundle=/etc/ssl/certs/ca-certificates.crt

# The temporary directory of the step under way; each step removes its own when it ends,
# the EXIT trap the one of a step that failed.
work=""
cleanup() {
  [[ -n $work ]] || return 0
  # debootstrap mounts /proc and /sys in the target; an interrupted run may leave them.
  local mount
  for mount in $(findmnt -rn -o TARGET | grep -F "$work/" | sort -r); do umount -l "$mount" || true; done
  rm -rf --one-file-system "$work"
  work=""
}
trap cleanup EXIT

# The Debian mirror this machine's apt uses for the suite (deb822 .sources or one-line
# .list), so debootstrap fetches from where apt-get does; FLEET_MIRROR_DEBIAN_MIRROR wins.
debian_mirror() {
  if [[ -n ${FLEET_MIRROR_DEBIAN_MIRROR:-} ]]; then echo "$FLEET_MIRROR_DEBIAN_MIRROR"; return; fi
  local file found=""
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [[ -f $file ]] || continue
    if [[ $file == *.sources ]]; then
      found="$(awk -v suite="$DEBIAN_SUITE" '
        BEGIN { RS = ""; FS = "\n" }
        { uris = ""; ok = 0
          for (i = 1; i <= NF; i++) {
            if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uris = u[2] }
            if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) ok = 1 }
          }
          if (ok && uris != "") { print uris; exit } }' "$file")"
    else
      found="$(awk -v suite="$DEBIAN_SUITE" '$1 == "deb" { for (i = 2; i < NF; i++) if ($i !~ /^\[/ && $(i + 1) == suite) { print $i; exit } }' "$file")"
    fi
    [[ -n $found ]] && break
  done
  echo "${found:-http://deb.debian.org/debian}"
}

# Checks that NPM_VERSION is the npm the pinned Node bundles: the newest "upgrade npm to"
# entry at or below the version's own heading in the CHANGELOG the Node package carries.
check_npm_pin() {
  local changelog="$1" bundled
  bundled="$(awk -v id="<a id=\"$node_version\"></a>" '
    index($0, id) { seen = 1 }
    seen && match($0, /upgrade npm to [0-9]+\.[0-9]+\.[0-9]+/) { print substr($0, RSTART + 15, RLENGTH - 15); exit }' "$changelog")"
  if [[ -z $bundled ]]; then
    log "error: Node ${node_version}'s CHANGELOG names no npm upgrade; check NPM_VERSION by hand"
    exit 1
  fi
  if [[ $bundled != "$NPM_VERSION" ]]; then
    log "error: Node ${node_version} bundles npm ${bundled}; set NPM_VERSION=${bundled} in scripts/image/versions.env"
    exit 1
  fi
}

build_rootfs() {
  if [[ -f "$out/.complete" && -f "$out/rootfs.tar" ]]; then
    log "cached: $out"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || { log "error: building the base's root filesystem needs root (debootstrap)"; exit 1; }
  command -v npm >/dev/null || { log "error: npm is needed to fetch Node, npm and yarn from the npm registry"; exit 1; }
  if ! command -v debootstrap >/dev/null; then
    log "installing Debian's debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; }
  fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/fleet-mirror-base.XXXXXX")"
  local root="$work/rootfs" mirror start=$SECONDS
  mirror="$(debian_mirror)"

  log "fetching node-linux-${node_arch}@${node_version}, npm@${NPM_VERSION}, yarn@${YARN_VERSION} from the npm registry"
  # npm pack checks each tarball against the registry's integrity before writing it.
  (cd "$work" && npm pack --silent "node-linux-${node_arch}@${node_version}" "npm@${NPM_VERSION}" "yarn@${YARN_VERSION}" >&2)
  mkdir -p "$work/node" "$work/npm" "$work/yarn"
  tar -xzf "$work/node-linux-${node_arch}-${node_version}.tgz" -C "$work/node"
  tar -xzf "$work/npm-${NPM_VERSION}.tgz" -C "$work/npm"
  tar -xzf "$work/yarn-${YARN_VERSION}.tgz" -C "$work/yarn"
  check_npm_pin "$work/node/package/CHANGELOG.md"

  log "debootstrap --variant=minbase ${DEBIAN_SUITE} from ${mirror} (first time: a few minutes)"
  debootstrap --variant=minbase --arch="$deb_arch" "$DEBIAN_SUITE" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; log "error: debootstrap failed"; exit 1; }
  log "debootstrap done in $((SECONDS - start))s"

  # debian:*-slim: dpkg leaves out documentation, manuals and translations from now on
  # (copyright files stay), and apt keeps no package cache or lists in the image.
  cat > "$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
  cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
CFG
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,groff,info,locale,lintian,linda}/*
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old "$root"/tmp/*
  find "$root/var/log" -type f -exec truncate -s 0 {} +
  # The daemon provides these to every container.
  rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
  touch "$root/etc/resolv.conf"

  groupadd --root "$root" --gid 1000 node
  useradd --root "$root" --uid 1000 --gid node --shell /bin/bash --create-home node

  # Node as the official image lays out nodejs.org's tarball in /usr/local (headers for
  # this architecture's OpenSSL only, a `nodejs` link), then npm and yarn beside it.
  local node="$work/node/package"
  install -D -m 0755 "$node/bin/node" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/include" "$root/usr/local/share" "$root/usr/local/lib/node_modules"
  cp -a "$node/include/node" "$root/usr/local/include/node"
  cp -a "$node/share/." "$root/usr/local/share/"
  if [[ -d "$root/usr/local/include/node/openssl/archs" ]]; then
    find "$root/usr/local/include/node/openssl/archs" -mindepth 1 -maxdepth 1 ! -name "$openssl_arch" -exec rm -rf {} +
  fi
  ln -s node "$root/usr/local/bin/nodejs"
  mv "$work/npm/package" "$root/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  mv "$work/yarn/package" "$root/opt/yarn-v${YARN_VERSION}"
  ln -s "/opt/yarn-v${YARN_VERSION}/bin/yarn" "$root/usr/local/bin/yarn"
  ln -s "/opt/yarn-v${YARN_VERSION}/bin/yarnpkg" "$root/usr/local/bin/yarnpkg"
  chown -R 0:0 "$root/usr/local" "$root/opt"
  # The official image's entrypoint does this: arguments that are not a command (a flag,
  # a script) are given to node.
  cat > "$root/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || ! command -v "$1" >/dev/null 2>&1 || { [ -f "$1" ] && [ ! -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"
SH
  chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"

  # The binaries run in the new root before anything is written to the cache.
  local node_says npm_says
  node_says="$(chroot "$root" /usr/local/bin/node --version)"
  npm_says="$(chroot "$root" /usr/local/bin/node /usr/local/lib/node_modules/npm/bin/npm-cli.js --version)"
  [[ $node_says == "v$node_version" && $npm_says == "$NPM_VERSION" ]] \
    || { log "error: the new root runs node $node_says and npm $npm_says"; exit 1; }

  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  tar --numeric-owner --xattrs -C "$root" -cf "$out.partial/rootfs.tar" .
  {
    echo "NODE_VERSION=$node_version"
    echo "NPM_VERSION=$NPM_VERSION"
    echo "YARN_VERSION=$YARN_VERSION"
    echo "DEBIAN_SUITE=$DEBIAN_SUITE"
    echo "DEBIAN_MIRROR=$mirror"
    echo "BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } > "$out.partial/versions"
  rm -rf "$out"
  mv "$out.partial" "$out"
  touch "$out/.complete"
  log "done in $((SECONDS - start))s: $out ($(du -m "$out/rootfs.tar" | cut -f1) MB)"
  cleanup
}

# Imports the cached root filesystem with the host's CA bundle on top as $tag, unless the
# daemon's $tag was made from the same cache key and the same CA bundle.
import_image() {
  [[ -f $ca_bundle ]] || { log "error: no CA bundle at $ca_bundle (Debian's ca-certificates)"; exit 1; }
  local ca_hash have_key have_ca
  ca_hash="$(sha256sum "$ca_bundle" | cut -c1-64)"
  have_key="$(docker image inspect --format '{{index .Config.Labels "org.fleet-mirror.base"}}' "$tag" 2>/dev/null || true)"
  have_ca="$(docker image inspect --format '{{index .Config.Labels "org.fleet-mirror.ca-sha256"}}' "$tag" 2>/dev/null || true)"
  if [[ $have_key == "$key" && $have_ca == "$ca_hash" ]]; then
    log "in the daemon: $tag"
    return 0
  fi
  log "importing $tag"
  work="$(mktemp -d "${TMPDIR:-/tmp}/fleet-mirror-base.XXXXXX")"
  # A hard link when the cache and the temporary directory share a filesystem, else a copy.
  ln "$out/rootfs.tar" "$work/rootfs.tar" 2>/dev/null || cp "$out/rootfs.tar" "$work/rootfs.tar"
  cp "$ca_bundle" "$work/ca-certificates.crt"
  cat > "$work/Dockerfile" <<DOCKERFILE
FROM scratch
ADD rootfs.tar /
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    NODE_VERSION=${node_version} \\
    YARN_VERSION=${YARN_VERSION} \\
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
LABEL org.fleet-mirror.base="${key}" org.fleet-mirror.ca-sha256="${ca_hash}"
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
DOCKERFILE
  local old
  old="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
  docker build --quiet --tag "$tag" "$work" >&2
  docker run --rm "$tag" node -e 'process.stdout.write(process.version + "\n")' >&2
  # The image this one replaces (another CA bundle or recipe), unless a container uses it.
  if [[ -n $old && $old != "$(docker image inspect --format '{{.Id}}' "$tag")" ]]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
  cleanup
}

mkdir -p "$(dirname "$out")"
exec 8>"$(dirname "$out")/.base.lock"
flock 8
build_rootfs
if [[ $what == rootfs ]]; then
  echo "$out"
  exit 0
fi
import_image
echo "$tag"
