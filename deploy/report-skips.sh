#!/usr/bin/env bash
# Says what the last ctest run in BUILD_DIR did not run and why: each test skipped for a
# dataset the clone does not have (GTEST_SKIP in the C++ suites, pytest.skip in
# python.pytest), counted per dataset, with how to provide it.
# Usage: deploy/report-skips.sh [BUILD_DIR]   (deploy/test.sh calls it after ctest)
set -euo pipefail
log="${1:-build}/Testing/Temporary/LastTest.log"
[[ -f "$log" ]] || exit 0
awk '
  # gtest: the skip message line, then "[  SKIPPED ] Suite.Name (N ms)".
  /skipped: dataset [^ ]+ not found under/ {
    match($0, /dataset [^ ]+/); pending = substr($0, RSTART + 8, RLENGTH - 8)
  }
  /^\[  SKIPPED \] [A-Za-z].*\([0-9]+ ms\)$/ { cpp++; per[pending == "" ? "(no reason given)" : pending]++; pending = "" }
  # pytest -rs: "SKIPPED [N] file:line: dataset X not found under ...".
  /^SKIPPED \[[0-9]+\]/ {
    n = $2; gsub(/[\[\]]/, "", n); py += n
    if (match($0, /dataset [^ ]+/)) per[substr($0, RSTART + 8, RLENGTH - 8)] += n
    else per["(no reason given)"] += n
  }
  END {
    total = cpp + py
    if (total == 0) { print "skipped: 0 tests"; exit }
    printf "skipped: %d tests (%d C++, %d Python), each for want of a measured dataset:\n", total, cpp, py
    for (d in per) printf "  %-32s %d tests\n", d, per[d]
    print "  provide them with GPUEST_DATA_DIR=<the folder holding gpumemnet/, lucid/ and timm/>"
    print "  (README.md, \"The measured data\"); everything that serves ran without them."
  }' "$log"
