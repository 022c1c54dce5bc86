# shellcheck shell=bash
# PASS/FAIL counting for the scripts that test the product from outside
# (deb-test.sh, deploy-test.sh); sourced, bash.
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
# check DESCRIPTION COMMAND...: PASS when the command succeeds.
check() {
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
