#!/usr/bin/env bash
# The durability report: the suite in full, every benchmark, then artifacts/durability-report.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m bench.report "$@"
