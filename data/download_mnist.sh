#!/usr/bin/env bash
# Fetches MNIST into data/mnist/ from its public mirrors and verifies each file against
# MNIST's published MD5 checksums (the ones torchvision checks). With no internet it says so
# within a few seconds and sets up Fashion-MNIST instead (same IDX format, 60k/10k, 28x28,
# 10 classes), which Debian ships: apt-get install dataset-fashion-mnist.
#
#   bash data/download_mnist.sh        (what `make data` runs)
#
# Exit 0 when data/mnist or data/fashion-mnist is ready, 1 when neither could be had.
set -u
cd "$(dirname "$0")"

MIRRORS=(
  "https://ossci-datasets.s3.amazonaws.com/mnist"
  "https://storage.googleapis.com/cvdf-datasets/mnist"
  "http://yann.lecun.com/exdb/mnist"
)
# MNIST_MIRROR=URL tries that mirror alone (file:// works too: how the checksum path is tested)
[ -n "${MNIST_MIRROR:-}" ] && MIRRORS=("$MNIST_MIRROR")
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
declare -A MD5=(
  [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c
)
FASHION_SYSTEM=/usr/share/datasets/fashion-mnist

md5_ok() {  # md5_ok NAME PATH: PATH holds MNIST's file NAME, checksum and all
  [ -f "$2" ] && [ "$(md5sum "$2" | cut -d' ' -f1)" = "${MD5[$1]}" ]
}

have_mnist() {
  for f in "${FILES[@]}"; do md5_ok "$f" "mnist/$f" || return 1; done
}

fetch() {  # fetch FILE: try each mirror; short connect timeout so offline fails fast
  local f=$1 m
  for m in "${MIRRORS[@]}"; do
    if curl -fsSL --connect-timeout 4 --max-time 120 --retry 0 -o "mnist/$f.part" "$m/$f" 2>/dev/null; then
      if md5_ok "$f" "mnist/$f.part"; then
        mv "mnist/$f.part" "mnist/$f"
        echo "  $f from $m: checksum OK"
        return 0
      fi
      echo "  $f from $m: checksum MISMATCH, trying the next mirror" >&2
    fi
  done
  rm -f "mnist/$f.part"
  return 1
}

use_fashion() {
  if [ -d fashion-mnist ] && [ -e fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "data: using Fashion-MNIST in data/fashion-mnist"
    return 0
  fi
  if [ -e "$FASHION_SYSTEM/train-images-idx3-ubyte.gz" ]; then
    ln -sfn "$FASHION_SYSTEM" fashion-mnist
    echo "data: using Fashion-MNIST: data/fashion-mnist -> $FASHION_SYSTEM"
    return 0
  fi
  echo "error: neither MNIST nor Fashion-MNIST is available ---> try: apt-get install dataset-fashion-mnist" >&2
  return 1
}

if have_mnist; then
  echo "data: MNIST is in data/mnist (checksums OK)"
  exit 0
fi
command -v curl >/dev/null || { echo "data: curl not found: cannot download MNIST" >&2; use_fashion; exit $?; }
mkdir -p mnist
echo "data: downloading MNIST into data/mnist"
for f in "${FILES[@]}"; do
  md5_ok "$f" "mnist/$f" && continue
  if ! fetch "$f"; then
    echo "data: could not download MNIST (no internet, no mirror answered, or no checksum matched): falling back to Fashion-MNIST" >&2
    rmdir mnist 2>/dev/null
    use_fashion
    exit $?
  fi
done
echo "data: MNIST ready in data/mnist"
