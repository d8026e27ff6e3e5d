#!/usr/bin/env bash
# The ctest regex of the tests to run after changing a file or folder of sources/:
#   cd build && ctest -R "$(../tests/sources/tests-of.sh sources/mad/pma_decode.cpp)"
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 sources/<folder>[/file]" >&2; exit 2; }
folder=${1#./}; folder=${folder#sources/}; folder=${folder%%/*}
regex=$(awk -v f="$folder" '!/^#/ && $1 == f { print $2 }' "$(dirname "$0")/tests_of_sources.txt")
[[ -n "$regex" ]] || { echo "$0: sources/$folder is not in tests/sources/tests_of_sources.txt" >&2; exit 1; }
echo "$regex"
