#!/usr/bin/env bash
# Run sparkhc in the image built by docker/build.sh, in Spark local mode, with a data folder
# mounted read-only at /data and a work folder (outputs) at /work.
#
#   docker/run.sh demo [FLAGS]                 # sparkhc demo --data-dir /data --workdir /work/demo
#   docker/run.sh featurize|train|predict|evaluate|reclassify [FLAGS]
#                                              # spark-submit /opt/sparkhc/jobs/NAME.py FLAGS
#   docker/run.sh sparkhc VERB [FLAGS]         # any CLI verb
#   docker/run.sh CMD [ARGS]                   # anything else (bash, spark-submit, python ...)
#
# Options (before the command): --data DIR (default $SPARKHC_DATA_DIR, else ../shared/data
# next to the repository, else ./data), --work DIR (default ./sparkhc-work), --image IMAGE
# (default sparkhc:latest), --memory SIZE (container memory limit, default none).
# Paths inside the flags are container paths: /data/... and /work/...
# Environment: ENGINE (podman|docker), NETWORK (default host: Spark binds to loopback,
# and `sparkhc fetch` can download), SPARK_SUBMIT_OPTS_EXTRA (extra spark-submit flags).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${IMAGE:-sparkhc:latest}
NETWORK=${NETWORK:-host}
WORK=${SPARKHC_WORK_DIR:-$PWD/sparkhc-work}
MEMORY=""
if [[ -n "${SPARKHC_DATA_DIR:-}" ]]; then DATA=$SPARKHC_DATA_DIR
elif [[ -d "$ROOT/../shared/data" ]]; then DATA=$ROOT/../shared/data
else DATA=$PWD/data; fi

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --data) DATA=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --image) IMAGE=$2; shift 2 ;;
        --memory) MEMORY=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        --) shift; break ;;
        -*) echo "run.sh: unknown option $1" >&2; usage 2 ;;
        *) break ;;
    esac
done
[[ $# -gt 0 ]] || usage 2

if [[ -z "${ENGINE:-}" ]]; then
    if command -v podman >/dev/null; then ENGINE=podman
    elif command -v docker >/dev/null; then ENGINE=docker
    else echo "run.sh: neither podman nor docker is installed" >&2; exit 1; fi
fi
ENGINE_FLAGS=()
if [[ "$ENGINE" == podman ]] && command -v runc >/dev/null; then
    ENGINE_FLAGS+=(--runtime "$(command -v runc)")
fi

[[ -d "$DATA" ]] || { echo "run.sh: data folder $DATA not found (pass --data DIR)" >&2; exit 2; }
mkdir -p "$WORK"
DATA=$(cd "$DATA" && pwd)
WORK=$(cd "$WORK" && pwd)

cmd=("$@")
case "$1" in
    demo)
        shift
        cmd=(sparkhc demo --data-dir /data --workdir /work/demo "$@") ;;
    featurize|train|predict|evaluate|reclassify)
        job=$1; shift
        # shellcheck disable=SC2206  # word splitting of the extra flags is intended
        extra=(${SPARK_SUBMIT_OPTS_EXTRA:-})
        cmd=(spark-submit --properties-file /opt/sparkhc/conf/spark-defaults.local.conf
             "${extra[@]}" "/opt/sparkhc/jobs/$job.py" "$@") ;;
esac

run_flags=(--rm --network "$NETWORK"
           --user "$(id -u):$(id -g)" --env HOME=/tmp
           -v "$DATA:/data:ro" -v "$WORK:/work")
[[ -n "$MEMORY" ]] && run_flags+=(--memory "$MEMORY")
[[ -t 0 && -t 1 ]] && run_flags+=(-it)

exec "$ENGINE" "${ENGINE_FLAGS[@]}" run "${run_flags[@]}" "$IMAGE" "${cmd[@]}"
