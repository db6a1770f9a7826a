# `ctest -D Experimental` (or Nightly) submits to a CDash the user names:
#   cmake -S . -B build -DKREPLAY_CDASH_SITE=cdash.example.org [-DKREPLAY_CDASH_PROJECT=kreplay]
# Nothing is submitted anywhere by default: without KREPLAY_CDASH_SITE the
# submit step has no drop site and fails with ctest's own message.
set(KREPLAY_CDASH_SITE "" CACHE STRING "CDash host that ctest -D Experimental submits to (empty: none)")
set(KREPLAY_CDASH_PROJECT "kreplay" CACHE STRING "CDash project name")
set(KREPLAY_CDASH_METHOD "https" CACHE STRING "CDash submit method (https or http)")

set(CTEST_PROJECT_NAME "${KREPLAY_CDASH_PROJECT}")
set(CTEST_NIGHTLY_START_TIME "01:00:00 UTC")
set(CTEST_SUBMIT_URL "")
if(KREPLAY_CDASH_SITE)
  set(CTEST_DROP_METHOD "${KREPLAY_CDASH_METHOD}")
  set(CTEST_DROP_SITE "${KREPLAY_CDASH_SITE}")
  set(CTEST_DROP_LOCATION "/submit.php?project=${KREPLAY_CDASH_PROJECT}")
  set(CTEST_DROP_SITE_CDASH TRUE)
  set(CTEST_SUBMIT_URL "${KREPLAY_CDASH_METHOD}://${KREPLAY_CDASH_SITE}/submit.php?project=${KREPLAY_CDASH_PROJECT}")
endif()
