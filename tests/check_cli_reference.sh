#!/usr/bin/env bash
# docs/cli.md must be what `mmtune help --markdown` writes now: the CLI reference is
# generated from the option tables that --help prints, never edited by hand.
# Usage: check_cli_reference.sh MMTUNE DOC
set -u
if "$1" help --markdown | diff -u "$2" - >&2; then exit 0; fi
echo "docs/cli.md is stale: build/tuner/mmtune help --markdown > docs/cli.md" >&2
exit 1
