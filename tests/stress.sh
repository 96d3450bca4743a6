#!/usr/bin/env bash
# Run the test suite (`make test`) N times on a fresh clone while CPU-bound processes run beside it: a test that
# passes only on a quiet machine fails here.
#
#   tests/stress.sh [N]                      N rounds (default 3) of `make test`, two CPU hogs beside it
#   PYTEST_ARGS="tests/test_sink.py -q" tests/stress.sh 1    one round of a subset (passed to `make test`)
#
# Environment: HOGS (CPU-bound processes beside the tests, default 2), PYTEST_ARGS (as for `make test`),
# STRESS_DIR (where the clone and the logs go; default a new folder under ${TMPDIR:-/tmp}, kept for reading).
# The clone is of this checkout's HEAD (commit first: uncommitted changes are not in it); its first round builds
# its own .venv and stages the data (`make test` does both), the later rounds reuse them. A STRESS_DIR used before
# keeps its clone, moved to the current HEAD.
# Prints one line per round (pass/fail, seconds, log file) and the total; exits 0 when every round passed.
set -u

rounds="${1:-${STRESS_ROUNDS:-3}}"
hogs="${HOGS:-2}"
case "$rounds" in ''|*[!0-9]*) echo "error: N must be a whole number, got '$rounds'" >&2; exit 2;; esac
case "$hogs" in ''|*[!0-9]*) echo "error: HOGS must be a whole number, got '$hogs'" >&2; exit 2;; esac
repo="$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)" || exit 2
work="${STRESS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/apam-stress.XXXXXX")}"
mkdir -p "$work" || exit 2
clone="$work/clone"

hog_pids=()
stop_hogs() {
    for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null; done
    hog_pids=()
}
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM
trap stop_hogs EXIT

if [ ! -d "$clone/.git" ]; then
    git clone --quiet "$repo" "$clone" || { echo "error: cannot clone $repo into $clone" >&2; exit 2; }
else  # a STRESS_DIR given again: its clone (and .venv) moves to this checkout's HEAD
    git -C "$clone" fetch --quiet "$repo" HEAD && git -C "$clone" checkout --quiet --detach FETCH_HEAD ||
        { echo "error: cannot update the clone $clone to $repo's HEAD" >&2; exit 2; }
fi
echo "stress: $rounds round(s) of make test in $clone ($(git -C "$clone" rev-parse --short HEAD)), $hogs CPU hog(s)" \
     "beside it${PYTEST_ARGS:+, PYTEST_ARGS=$PYTEST_ARGS}"

for _ in $(seq 1 "$hogs"); do
    ( exec python3 -c 'while True: pass' ) &
    hog_pids+=("$!")
done

passed=0
for i in $(seq 1 "$rounds"); do
    log="$work/round-$i.log"
    start=$SECONDS
    if make -C "$clone" test PYTEST_ARGS="${PYTEST_ARGS:-}" >"$log" 2>&1; then
        result=pass
        passed=$((passed + 1))
    else
        result="FAIL ($(grep -E '^(FAILED|ERROR) ' "$log" | head -3 | tr '\n' ' ')see the log)"
    fi
    echo "round $i/$rounds: $result, $((SECONDS - start)) s, $log"
done
stop_hogs
echo "stress: $passed of $rounds round(s) passed"
[ "$passed" -eq "$rounds" ]
