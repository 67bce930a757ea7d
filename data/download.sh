#!/usr/bin/env bash
# Fetches a dataset into data/ (what `make data DATASET=NAME` runs):
#
#   bash data/download.sh            MNIST, as before: data/download_mnist.sh (from its mirrors,
#   bash data/download.sh mnist      checksummed; Fashion-MNIST from Debian when offline)
#   bash data/download.sh cifar10    CIFAR-10's binary version into data/cifar10/ (train with -d data/cifar10)
#
# CIFAR-10 comes from its official site, https://www.cs.toronto.edu/~kriz/cifar.html: the archive
# is checked against the MD5 the site publishes before anything is unpacked, and only the seven
# files the reader needs are taken from it. With no internet it says so within seconds and exits 1.
# For tests: CIFAR_URL=URL (file:// works), CIFAR_MD5=SUM, CIFAR_DEST=DIR (default data/cifar10).
#
# Exit 0 when the dataset is ready, 1 when it could not be had, 2 for an unknown name.
set -u
cd "$(dirname "$0")"

case "${1:-mnist}" in
  mnist) exec bash download_mnist.sh ;;
  cifar10 | cifar-10 | CIFAR-10) ;;
  *) echo "error: unknown dataset '$1' ---> try: make data DATASET=mnist, or DATASET=cifar10" >&2; exit 2 ;;
esac

URL=${CIFAR_URL:-https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz}
MD5=${CIFAR_MD5:-c32a1d4ab5d03f1284b67883e8d87530}
DEST=${CIFAR_DEST:-cifar10}
BATCHES=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin)
BATCH_BYTES=30730000  # 10,000 records of 3,073 bytes
case "$DEST" in /*) SHOWN=$DEST ;; *) SHOWN=data/$DEST ;; esac

have_cifar() {  # every batch a regular file of the right size, and the class names
  local f
  for f in "${BATCHES[@]}"; do
    [ -f "$1/$f" ] && [ "$(stat -c %s "$1/$f")" = "$BATCH_BYTES" ] || return 1
  done
  [ -f "$1/batches.meta.txt" ]
}

if have_cifar "$DEST"; then
  echo "data: CIFAR-10 is in $SHOWN (train with -d $SHOWN)"
  exit 0
fi
command -v curl >/dev/null || { echo "error: curl not found: cannot download CIFAR-10 ---> try: apt-get install curl" >&2; exit 1; }
command -v md5sum >/dev/null || { echo "error: md5sum not found: cannot check CIFAR-10's download" >&2; exit 1; }

# unpacked beside the destination, which is made only once everything has checked out
TMP=$(mktemp -d "$(dirname "$DEST")/.cifar10-download.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
ARCHIVE="$TMP/cifar-10-binary.tar.gz"
echo "data: downloading CIFAR-10's binary version (163 MB) from $URL"
# a short connect timeout (name lookup included) so that an offline machine fails fast
if ! curl -fL --connect-timeout 5 --max-time 1800 --retry 0 --progress-bar -o "$ARCHIVE" "$URL"; then
  echo "error: could not download CIFAR-10 from $URL: no internet, or the site did not answer ---> try again when online, or copy cifar-10-binary.tar.gz's files into $SHOWN" >&2
  exit 1
fi
SUM=$(md5sum "$ARCHIVE" | cut -d' ' -f1)
if [ "$SUM" != "$MD5" ]; then
  echo "error: the download's MD5 is $SUM, CIFAR-10's published one is $MD5: a damaged or different file, not unpacked" >&2
  exit 1
fi
echo "  MD5 $SUM: checksum OK"
MEMBERS=()
for f in "${BATCHES[@]}" batches.meta.txt; do MEMBERS+=("cifar-10-batches-bin/$f"); done
if ! tar -xzf "$ARCHIVE" -C "$TMP" --no-same-owner "${MEMBERS[@]}"; then
  echo "error: could not unpack $URL's archive (it lacks one of: ${BATCHES[*]} batches.meta.txt)" >&2
  exit 1
fi
if ! have_cifar "$TMP/cifar-10-batches-bin"; then
  echo "error: the archive's batches are not ${BATCH_BYTES} bytes each: not CIFAR-10's binary version" >&2
  exit 1
fi
mkdir -p "$DEST" || exit 1
for f in "${BATCHES[@]}" batches.meta.txt; do mv -f "$TMP/cifar-10-batches-bin/$f" "$DEST/$f" || exit 1; done
echo "data: CIFAR-10 ready in $SHOWN (train with -d $SHOWN)"
