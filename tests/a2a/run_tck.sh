#!/usr/bin/env bash
# Runs the A2A conformance kit (a2aproject/a2a-tck, branch 1.0-dev, from a
# clone you made; it is not kept here) against a real lead over gRPC,
# JSON-RPC and HTTP+JSON, with
# the playbook's teammates answering the kit's scenarios (push notifications
# to the kit's webhook on localhost, and to example.com, which its
# configuration tests name):
#
#   tests/a2a/run_tck.sh PATH/TO/a2a-tck [PYTHON [TRANSPORTS [LEVEL]]]
#
# TRANSPORTS: comma-separated, default grpc,jsonrpc,http_json; LEVEL:
# must, should or may (that level's tests alone), default all (every
# level's).
#
# PYTHON (default python3) needs the kit's dependencies (`pip install -e
# PATH/TO/a2a-tck`) and grpcio-tools. The lead is target/release/lead
# (cargo build --release -p lead). Prints the kit's report; exits with its
# status.
set -euo pipefail
tck=$(cd "$1" && pwd)
python=${2:-python3}
transports=${3:-grpc,jsonrpc,http_json}
level=${4:-all}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$scratch"' EXIT

"$python" "$root/examples/python/gen_stubs.py" "$scratch/stubs" >/dev/null
join=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
"$root/target/release/lead" serve --listen 127.0.0.1:0 --http 127.0.0.1:0 \
  --state-dir "$scratch/state" --join-token "$join" --a2a-open tck \
  --a2a-push-allow localhost --a2a-push-allow example.com >"$scratch/lead.out" 2>"$scratch/lead.err" &
until [ "$(wc -l <"$scratch/lead.out")" -ge 2 ]; do sleep 0.1; done
grpc=$(sed -n 's/^listening on //p' "$scratch/lead.out")
console=$(sed -n 's/^console on //p' "$scratch/lead.out")
"$python" "$here/playbook.py" --lead "$grpc" --join-token "$join" --stubs "$scratch/stubs" \
  >"$scratch/playbook.out" &
until grep -q ready "$scratch/playbook.out" 2>/dev/null; do sleep 0.1; done
cd "$tck"
levels=()
[ "$level" = all ] || levels=(--level "$level")
"$python" run_tck.py --sut-host "${console%/}" --transport "$transports" "${levels[@]}" -v
