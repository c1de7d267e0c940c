#!/usr/bin/env bash
# The workspace's one build: `cargo test --workspace --release --no-run`,
# which makes the test executables and the binaries (cclab, quic-server,
# quic-client, qlog-analysis) in target/release from one feature set, so
# every stage of `make test` (the tests, the embedding examples' BoringSSL,
# the quiche tests, the reproduction, the report, Slurm, netem, the demo)
# uses the same build and nothing compiles twice. A no-op when up to date.
#
# Prints shell assignments for `eval` on standard output:
#   bin_<name>          each binary (dashes as underscores)
#   test_<pkg>__<name>  each test executable (integration tests by name;
#                       a crate's unit tests as <pkg>__lib or __bin_<name>)
#   bssl_out bssl_version bssl_features   boring-sys's build (its BoringSSL)
# Compiler messages go to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
./patches/bootstrap.sh >&2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo test --workspace --release --no-run --message-format=json-render-diagnostics >"$json"
python3 - "$json" <<'PY'
import json, shlex, sys

out = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    reason, pkg = m.get("reason"), m.get("package_id", "")
    if reason == "compiler-artifact":
        t = m["target"]
        if not m.get("executable"):
            if "#boring-sys@" in pkg and t["kind"] == ["lib"]:
                out["bssl_version"] = pkg.rsplit("@", 1)[1]
                out["bssl_features"] = ",".join(m["features"])
            continue
        name = t["name"].replace("-", "_")
        # path+file:///w/harness#0.1.0, or path+file:///w/tests#integration-tests@0.1.0
        frag = pkg.rsplit("#", 1)[-1]
        crate = (frag.split("@")[0] if "@" in frag else pkg.split("#")[0].rsplit("/", 1)[-1]).replace("-", "_")
        if t["kind"] == ["bin"] and not m["profile"]["test"]:
            out["bin_" + name] = m["executable"]
        elif t["kind"] == ["test"]:
            out[f"test_{crate}__{name}"] = m["executable"]
        elif m["profile"]["test"] and t["kind"][0] in ("lib", "rlib"):
            out[f"test_{crate}__lib"] = m["executable"]
        elif m["profile"]["test"] and t["kind"] == ["bin"]:
            out[f"test_{crate}__bin_{name}"] = m["executable"]
    elif reason == "build-script-executed" and "#boring-sys@" in pkg:
        out["bssl_out"] = m["out_dir"]
for k, v in sorted(out.items()):
    print(f"{k}={shlex.quote(v)}")
PY
