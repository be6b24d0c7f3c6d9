#!/usr/bin/env bash
# Build the sparkhc image (docker/Dockerfile) with podman (or docker), offline-capable:
#   1. podman: make sure /etc/containers/containers.conf lets containers start in restricted
#      sandboxes ([containers] default_ulimits = [] and pids_limit = 0; root only, kept if set);
#   2. base image: $BASE if given, else a local localhost/sparkhc-base:bookworm, else
#      debian:bookworm-slim from a registry, else one built here with
#      `debootstrap --variant=minbase bookworm` + `podman import` (root, ~30 s);
#   3. the wheelhouse: scripts/build_wheelhouse.sh (sparkhc and all its dependencies as wheels,
#      made on the host: pip inside the build never needs an index);
#   4. podman build --network host (apt inside the build) with the runc runtime.
#
#   docker/build.sh                      # -> localhost/sparkhc:latest (and :VERSION)
#   BASE=debian:bookworm-slim docker/build.sh
#
# Environment: IMAGE (default sparkhc), BASE, ENGINE (podman|docker; default: podman if
# installed), DEBIAN_MIRROR (default http://deb.debian.org/debian), WHEELHOUSE (default
# dist/wheelhouse), PULL_TIMEOUT (seconds to try the registry for the base, default 60;
# 0 skips it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${IMAGE:-sparkhc}
BASE_LOCAL=localhost/sparkhc-base:bookworm
BASE_REMOTE=docker.io/library/debian:bookworm-slim
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEELHOUSE=${WHEELHOUSE:-$ROOT/dist/wheelhouse}
PULL_TIMEOUT=${PULL_TIMEOUT:-60}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)

say() { printf '[build.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [[ -z "${ENGINE:-}" ]]; then
    if command -v podman >/dev/null; then ENGINE=podman
    elif command -v docker >/dev/null; then ENGINE=docker
    else die "neither podman nor docker is installed (Debian: apt-get install podman runc)"; fi
fi
ENGINE_FLAGS=()
if [[ "$ENGINE" == podman ]]; then
    # runc works in sandboxes where podman's default runtime (crun) cannot set up the container
    RUNC=$(command -v runc || true)
    [[ -n "$RUNC" ]] && ENGINE_FLAGS+=(--runtime "$RUNC")
fi
engine() { "$ENGINE" "${ENGINE_FLAGS[@]}" "$@"; }

# -- 1. containers.conf ------------------------------------------------------------------------
podman_conf() {
    local conf=/etc/containers/containers.conf
    [[ "$ENGINE" == podman && "$(id -u)" == 0 ]] || return 0
    if [[ -f "$conf" ]] && grep -Eq '^[[:space:]]*default_ulimits' "$conf" \
        && grep -Eq '^[[:space:]]*pids_limit' "$conf"; then
        return 0
    fi
    say "adding default_ulimits = [] and pids_limit = 0 to [containers] in $conf"
    mkdir -p "$(dirname "$conf")"
    touch "$conf"
    if ! grep -Eq '^[[:space:]]*\[containers\]' "$conf"; then
        printf '\n[containers]\n' >>"$conf"
    fi
    local keys=()
    grep -Eq '^[[:space:]]*default_ulimits' "$conf" || keys+=('default_ulimits = []')
    grep -Eq '^[[:space:]]*pids_limit' "$conf" || keys+=('pids_limit = 0')
    local k
    for k in "${keys[@]}"; do
        sed -i "/^[[:space:]]*\[containers\]/a $k" "$conf"
    done
}

# -- 2. base image -----------------------------------------------------------------------------
debootstrap_base() {
    [[ "$ENGINE" == podman ]] || die "no base image: pass BASE=<a Debian bookworm image>"
    [[ "$(id -u)" == 0 ]] || die "building the base with debootstrap needs root (or pass BASE=...)"
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap), or pass BASE=..."
    local rootfs
    rootfs=$(mktemp -d /var/tmp/sparkhc-rootfs.XXXXXX)
    say "debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR"
    debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >&2
    cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb ${DEBIAN_MIRROR%/debian}/debian-security bookworm-security main
SOURCES
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" --numeric-owner -cf - . \
        | podman import --change 'CMD ["/bin/bash"]' - "$BASE_LOCAL" >&2
    rm -rf "$rootfs"
    say "imported $BASE_LOCAL"
}

pick_base() {
    if [[ -n "${BASE:-}" ]]; then echo "$BASE"; return; fi
    if engine image inspect "$BASE_LOCAL" >/dev/null 2>&1; then echo "$BASE_LOCAL"; return; fi
    if engine image inspect "$BASE_REMOTE" >/dev/null 2>&1; then echo "$BASE_REMOTE"; return; fi
    if [[ "$PULL_TIMEOUT" != 0 ]] && timeout "$PULL_TIMEOUT" "$ENGINE" "${ENGINE_FLAGS[@]}" pull "$BASE_REMOTE" >&2 2>/dev/null; then
        echo "$BASE_REMOTE"; return
    fi
    say "no registry serves $BASE_REMOTE: building $BASE_LOCAL with debootstrap"
    debootstrap_base
    echo "$BASE_LOCAL"
}

# -- 3. wheelhouse and build context -----------------------------------------------------------
context() {
    local ctx=$ROOT/dist/docker-context
    "$ROOT/scripts/build_wheelhouse.sh" "$WHEELHOUSE" >&2
    rm -rf "$ctx"
    mkdir -p "$ctx"
    # hard links when the wheelhouse is on the same file system (no 500 MB copy)
    cp -al "$WHEELHOUSE" "$ctx/wheelhouse" 2>/dev/null || cp -a "$WHEELHOUSE" "$ctx/wheelhouse"
    (cd "$ROOT" && tar --exclude='__pycache__' -cf - jobs conf) | tar -xf - -C "$ctx"
    echo "$ctx"
}

podman_conf
BASE_IMAGE=$(pick_base)
CTX=$(context)
say "building $IMAGE:$VERSION from $BASE_IMAGE with $ENGINE"
BUILD_FLAGS=(--network host)
# docker format: OCI images ignore SHELL (the Dockerfile runs its steps with pipefail)
[[ "$ENGINE" == podman ]] && BUILD_FLAGS+=(--format docker)
engine build "${BUILD_FLAGS[@]}" \
    --build-arg "BASE=$BASE_IMAGE" --build-arg "SPARKHC_VERSION=$VERSION" \
    -t "$IMAGE:$VERSION" -t "$IMAGE:latest" -f "$ROOT/docker/Dockerfile" "$CTX"
say "built $IMAGE:$VERSION (run it with docker/run.sh demo)"
