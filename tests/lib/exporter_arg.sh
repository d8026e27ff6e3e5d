# Sourced (without arguments) by the shell tests: the exporter binary is `--exporter PATH`, the
# first two arguments, as take_exporter_arg() takes it in tests/lib/exporter_harness.py. Sets
# EXPORTER and shifts the two off the script's own arguments.
if [ "${1:-}" != --exporter ] || [ -z "${2:-}" ]; then
  echo "usage: $0 --exporter PATH [ARGS...]" >&2
  exit 2
fi
EXPORTER=$2
shift 2
