#!/bin/sh
# preload/shunt_syscall.c serves a system call by number only when its
# table says so: every number of the switch must be in the table, and the
# table must name nothing the switch does not serve.
#   check_syscall_table.sh preload/shunt_syscall.c
set -eu
f=${1:?usage: check_syscall_table.sh SHUNT_SYSCALL_C}
cases=$(grep -o 'case SYS_[a-z0-9_]*' "$f" | sed 's/case //' | sort -u)
table=$(sed -n '/^static const unsigned char served/,/^};/p' "$f" | grep -o '\[SYS_[a-z0-9_]*\]' |
	tr -d '[]' | sort -u)
if [ "$cases" != "$table" ]; then
	echo "FAIL: the switch and the table of $f differ:"
	printf '%s\n' "$cases" >"${TMPDIR:-/tmp}/cases.$$"
	printf '%s\n' "$table" | diff "${TMPDIR:-/tmp}/cases.$$" - || true
	rm -f "${TMPDIR:-/tmp}/cases.$$"
	exit 1
fi
echo "PASS: $(printf '%s\n' "$cases" | wc -l) system calls served by number, table and switch agree"
