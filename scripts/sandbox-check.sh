#!/usr/bin/env bash
# Whether boardd runs inside packaging/boardd.service's sandbox, where
# systemd cannot be asked (no systemd as PID 1: a container, a build
# machine): runs boardd under strace (every thread and child) and checks
#   - SystemCallFilter=: every system call it made is in the unit's allow
#     list (the groups expanded by systemd-analyze syscall-filter) and none
#     in the groups it denies;
#   - MemoryDenyWriteExecute=: no mapping made writable and executable at
#     once, and none made executable after it was mapped (mprotect with
#     PROT_EXEC), which is what the filter refuses;
#   - RestrictAddressFamilies=AF_UNIX: no socket of another family.
# Exit status 0 when boardd stays inside.
#   scripts/sandbox-check.sh [BOARDD] [-- BOARDD ARGUMENTS]   (default: --demo --for 3s)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
boardd=${1:-$(swift build --show-bin-path)/boardd}
shift || true
[ "${1:-}" = -- ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--demo --for 3s)
unit=${BOARDD_UNIT:-packaging/boardd.service}
for tool in strace systemd-analyze; do
    command -v $tool > /dev/null || { echo "sandbox-check: needs $tool" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
RUNTIME_DIRECTORY=$work strace -f -qq -o "$work/trace" -e trace=all "$boardd" "${args[@]}" > /dev/null 2> "$work/stderr" || {
    echo "sandbox-check: boardd ${args[*]} failed:" >&2
    tail -n 5 "$work/stderr" >&2
    exit 1
}
# The filter lines of the unit, and every group's system calls.
grep '^SystemCallFilter=' "$unit" | cut -d= -f2- > "$work/filters"
systemd-analyze syscall-filter > "$work/groups" 2> /dev/null
python3 - "$work/trace" "$work/filters" "$work/groups" <<'PY'
import re, sys
trace, filters, groups_file = sys.argv[1:]
groups, name = {}, None
for line in open(groups_file):
    s = line.strip()
    if not s or s.startswith("#"): continue
    if not line.startswith(" "):
        name = s; groups[name] = []
    elif name:
        groups[name].append(s)
def expand(item, seen=()):
    if not item.startswith("@"): return {item}
    out = set()
    for x in groups.get(item, []):
        if x not in seen: out |= expand(x, seen + (x,))
    return out
allowed, denied = set(), set()
for f in open(filters).read().split("\n"):
    f = f.strip()
    if not f: continue
    if f.startswith("~"):
        for item in f[1:].split(): denied |= expand(item)
    else:
        for item in f.split(): allowed |= expand(item)
allowed -= denied
used, wx, execafter, families = {}, [], [], set()
call = re.compile(r"^\d+\s+([a-z0-9_]+)\(")
for line in open(trace):
    m = call.match(line)
    if not m or "resumed>" in line: continue  # counted at its start
    name = m.group(1)
    used[name] = used.get(name, 0) + 1
    if name in ("mmap", "mprotect", "pkey_mprotect") and "PROT_WRITE" in line and "PROT_EXEC" in line: wx.append(line.strip())
    if name in ("mprotect", "pkey_mprotect") and "PROT_EXEC" in line: execafter.append(line.strip())
    if name == "socket":
        fm = re.search(r"socket\((AF_[A-Z0-9]+)", line)
        if fm: families.add(fm.group(1))
outside = sorted(n for n in used if n not in allowed and n != "exit")
bad = False
print("system calls made: %d distinct, %d calls" % (len(used), sum(used.values())))
if outside:
    bad = True
    print("OUTSIDE SystemCallFilter= (%s): %s" % (" ".join(open(filters).read().split("\n")).strip(),
          ", ".join("%s x%d" % (n, used[n]) for n in outside)))
else:
    print("SystemCallFilter=: every call in the allow list, none in the denied groups")
if wx or execafter:
    bad = True
    print("MemoryDenyWriteExecute=: refused mappings:")
    for l in (wx + execafter)[:10]: print("  " + l)
else:
    print("MemoryDenyWriteExecute=: no writable+executable mapping, no mprotect(PROT_EXEC)")
others = sorted(families - {"AF_UNIX"})
if others:
    bad = True
    print("RestrictAddressFamilies=AF_UNIX: sockets of " + ", ".join(others))
else:
    print("RestrictAddressFamilies=AF_UNIX: sockets of " + (", ".join(sorted(families)) or "no family"))
sys.exit(1 if bad else 0)
PY
