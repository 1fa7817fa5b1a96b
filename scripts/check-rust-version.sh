#!/usr/bin/env bash
# Fails unless every crate of the workspace declares the workspace's minimum
# Rust version by inheriting it (`rust-version.workspace = true`), so that
# the one value in the root Cargo.toml ([workspace.package] rust-version)
# is what cargo checks for every crate. Run by `make lint` (CI).
# The fuzz crate (fuzz/, its own workspace, nightly only) is not a member.
set -euo pipefail
cd "$(dirname "$0")/.."
check=$(cat <<'PY'
import json, re, sys

meta = json.load(sys.stdin)
root = open("Cargo.toml", encoding="utf-8").read()
section = re.search(r"^\[workspace\.package\]$(.*?)(?=^\[|\Z)", root, re.M | re.S)
found = section and re.search(r'^rust-version\s*=\s*"([^"]+)"', section.group(1), re.M)
want = found.group(1) if found else None
bad = [] if want else ["Cargo.toml: [workspace.package] has no rust-version"]
members = set(meta["workspace_members"])
for p in meta["packages"]:
    if p["id"] not in members:
        continue
    path = p["manifest_path"]
    text = open(path, encoding="utf-8").read()
    if not re.search(r"^rust-version\.workspace\s*=\s*true\s*$", text, re.M):
        bad.append(f"{path}: add `rust-version.workspace = true` to [package]")
    elif want and p.get("rust_version") != want:
        bad.append(f"{path}: rust-version {p.get('rust_version')} is not the workspace's {want}")
for b in bad:
    print(f"check-rust-version: {b}", file=sys.stderr)
if not bad:
    print(f"check-rust-version: {len(members)} crates inherit rust-version {want}")
sys.exit(1 if bad else 0)
PY
)
cargo metadata --no-deps --format-version 1 | python3 -c "$check"
