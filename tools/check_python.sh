#!/usr/bin/env bash
# Checks the Python sources (every .py file git knows of outside third_party/; pyproject.toml
# names the folders ruff leaves out) with the ruff and mypy pinned in requirements.txt, run from
# the pinned environment Bazel builds (@pip_venv): `ruff check` (lint and import order),
# `ruff format --check` and mypy (strict on executorch_trt; settings in pyproject.toml).
# usage: tools/check_python.sh [--fix]
# Exit 0 when all three pass, 1 naming what failed and what to run, 2 on bad usage or when the
# pinned environment cannot be built. --fix first applies ruff's fixes and formats the files,
# then checks (what ruff cannot fix, and mypy's findings, still fail).
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ $# -gt 1 || ( $# -eq 1 && "$1" != "--fix" ) ]]; then
  echo "check_python: unknown arguments '$*'; usage: tools/check_python.sh [--fix]" >&2
  exit 2
fi

# The pinned environment (created on first use, ~2 min; a no-op afterwards).
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! ./bazelw build --noshow_progress @pip_venv//:freeze.txt >"$log" 2>&1; then
  cat "$log" >&2
  echo "check_python: could not build the pinned environment (./bazelw build @pip_venv//:freeze.txt)" >&2
  exit 2
fi
venv="$(./bazelw info output_base 2>/dev/null)/external/pip_venv/venv/bin"
for tool in ruff mypy; do
  if [[ ! -x "$venv/$tool" ]]; then
    echo "check_python: $tool is not in the pinned environment ($venv); is it in requirements_lock.txt?" >&2
    exit 2
  fi
done

mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.py' | grep -v '^third_party/')

if [[ "${1:-}" == "--fix" ]]; then
  "$venv/ruff" check --force-exclude --fix --quiet "${files[@]}"
  "$venv/ruff" format --force-exclude --quiet "${files[@]}"
fi

failed=()
echo "check_python: ruff check ($("$venv/ruff" --version))"
"$venv/ruff" check --force-exclude "${files[@]}" || failed+=("ruff check")
echo "check_python: ruff format --check"
"$venv/ruff" format --force-exclude --check "${files[@]}" || failed+=("ruff format")
echo "check_python: mypy ($("$venv/mypy" --version))"
"$venv/mypy" || failed+=("mypy")

if ((${#failed[@]})); then
  joined="$(printf '%s, ' "${failed[@]}")"
  echo "check_python: failed: ${joined%, }. Run tools/check_python.sh --fix for lint and format" \
    "(then review the diff); fix what it cannot by hand (settings: pyproject.toml)."
  exit 1
fi
echo "check_python: ruff check, ruff format and mypy pass"
