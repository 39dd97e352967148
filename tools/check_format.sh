#!/usr/bin/env bash
# Checks that the C++ sources (core/, extension/, examples/, benchmarks/, py/binding/, tests/) are
# formatted as .clang-format says.
# usage: tools/check_format.sh [--fix]
# Exit 0 when formatted (or, without clang-format on PATH, after saying it skipped), 1 listing
# the files that are not. --fix rewrites them in place. CI installs Debian's clang-format
# (.ci/run) so the check runs there.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -gt 1 || ( $# -eq 1 && "$1" != "--fix" ) ]]; then
  echo "check_format: unknown arguments '$*'; usage: tools/check_format.sh [--fix]" >&2
  exit 2
fi

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format not installed; skipping (apt-get install clang-format)"
  exit 0
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard 'core/*.h' 'core/*.cpp' 'extension/*.h' 'extension/*.cpp' 'examples/*.h' 'examples/*.cpp' 'benchmarks/*.h' 'benchmarks/*.cpp' 'py/*.h' 'py/*.cpp' \
  'tests/*.h' 'tests/*.cpp' 'tests/*.cc')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format --style=file -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi

unformatted=()
for f in "${files[@]}"; do
  if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    unformatted+=("$f")
  fi
done
if ((${#unformatted[@]})); then
  echo "check_format: not formatted as .clang-format says (run tools/check_format.sh --fix):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted ($(clang-format --version))"
