#!/usr/bin/env bash
# Lints the OpenAPI document the service serves at /api/openapi.json with Redocly's
# `recommended` rules (redocly.yaml): the document is built from the route declarations
# (scripts/openapi-document.ts, no service started) into a temporary file, then linted.
# Exits non-zero on any error; warnings are printed and pass.
#
#   scripts/lint-openapi.sh        (npm run lint:openapi)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/openapi-lint-XXXXXX")"
trap 'rm -rf "$work"' EXIT

node --import tsx "$root/scripts/openapi-document.ts" > "$work/openapi.json"
# no usage report and no update check leave the machine
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$root/node_modules/.bin/redocly" lint "$work/openapi.json" --config "$root/redocly.yaml" --format "${REDOCLY_FORMAT:-stylish}"
