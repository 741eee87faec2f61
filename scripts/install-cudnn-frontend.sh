#!/usr/bin/env bash
# The cuDNN frontend's headers (header-only C++; cuDNN itself comes with the CUDA machine) from
# PyPI's nvidia-cudnn-frontend wheel, for the cuDNN attention path (ops/attention_cudnn.hpp):
# the wheel's include/ goes to third_party/cudnn-frontend/include (git ignores third_party/), with
# the frontend's licenses beside it. Configure again afterwards: CMake finds the headers there.
# The version and the wheel's SHA-256 are pinned; the headers are the same in every wheel of a
# version, so one platform's wheel is fetched wherever this runs. Nothing is done when that
# version is already there.
# Usage: scripts/install-cudnn-frontend.sh [destination, default third_party/cudnn-frontend]
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
wheel=nvidia_cudnn_frontend-${version}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
destination=${1:-third_party/cudnn-frontend}

if [[ -f ${destination}/VERSION && $(<"${destination}/VERSION") == "${version}" &&
  -f ${destination}/include/cudnn_frontend.h ]]; then
  echo "install-cudnn-frontend.sh: ${destination} already has the cuDNN frontend ${version}"
  exit 0
fi

scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT

# pip's own client, with few retries: an unreachable PyPI fails in seconds, not minutes.
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "install-cudnn-frontend.sh: python3 -m pip is not available; install pip" \
    "(e.g. apt-get install python3-pip) and run this again" >&2
  exit 1
fi
if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --retries 1 \
  --timeout 30 --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
  --implementation cp --abi cp311 "nvidia-cudnn-frontend==${version}" -d "${scratch}"; then
  echo "install-cudnn-frontend.sh: could not download nvidia-cudnn-frontend ${version} from" \
    "PyPI (is PyPI reachable from here? pip honours PIP_INDEX_URL and HTTPS_PROXY). Without" \
    "it graphstep builds without the cuDNN attention path; or point CUDNN_FRONTEND_HOME at a" \
    "checkout of github.com/NVIDIA/cudnn-frontend (the directory that holds include/)" >&2
  exit 1
fi
if [[ ! -f ${scratch}/${wheel} ]]; then
  echo "install-cudnn-frontend.sh: pip did not download ${wheel}; it has:" \
    "$(ls "${scratch}")" >&2
  exit 1
fi
if ! echo "${sha256}  ${scratch}/${wheel}" | sha256sum --check --status; then
  echo "install-cudnn-frontend.sh: ${wheel} does not have the pinned SHA-256 ${sha256};" \
    "not installing it" >&2
  exit 1
fi

# A wheel is a zip archive: its include/ and the licenses, unpacked beside the destination and
# moved into place whole, so an interrupted run leaves no half-written headers behind.
staging=${destination}.partial
rm -rf "${staging}"
mkdir -p "${staging}"
python3 - "${scratch}/${wheel}" "${staging}" <<'EOF'
import pathlib
import sys
import zipfile

wheel, staging = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as archive:
    headers = [n for n in archive.namelist() if n.startswith("include/") and not n.endswith("/")]
    licenses = [
        n for n in archive.namelist() if ".dist-info/licenses/" in n and not n.endswith("/")
    ]
    if not any(n == "include/cudnn_frontend.h" for n in headers):
        sys.exit(f"install-cudnn-frontend.sh: {wheel} has no include/cudnn_frontend.h")
    for member in headers:
        archive.extract(member, staging)
    for member in licenses:
        (staging / pathlib.Path(member).name).write_bytes(archive.read(member))
EOF
echo "${version}" >"${staging}/VERSION"
rm -rf "${destination}"
mv "${staging}" "${destination}"
echo "install-cudnn-frontend.sh: the cuDNN frontend ${version} is in ${destination};" \
  "configure again to build the cuDNN attention path"
