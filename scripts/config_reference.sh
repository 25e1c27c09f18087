#!/usr/bin/env bash
# Rewrites the generated part of docs/config.md (between its BEGIN and END markers) from the
# schema, as `cudagrad-train --config-reference` prints it. The test docs_config_reference fails
# while the page and the schema differ; this is how to make them agree.
# Environment: BUILD_DIR (default build; cudagrad-train must be built there).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
TRAIN=${BUILD_DIR:-build}/apps/cudagrad-train
[[ -x $TRAIN ]] || { echo "config_reference: build $TRAIN first (scripts/build.sh)" >&2; exit 1; }
/usr/bin/python3 tests/docs/config_reference_test.py docs/config.md "$TRAIN" --write
