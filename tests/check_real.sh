#!/bin/sh
# Code below the interposers calls libc only through REAL() (core/shunt_real.h):
# a bare call of an interposed name lands in shunt's own wrapper, which may
# answer for the accelerated connection instead of the socket (a bare
# ioctl(FIONREAD) on a socket still marked accelerated counts the ring).  So
# no object of core/, shm/ or fabric/ may leave one of preload/interposed.txt's
# names undefined.  preload/ defines them, and config/ and the agent protocol
# touch only files of their own.
#   check_real.sh INTERPOSED_TXT ARCHIVE...
set -eu
list=${1:?usage: check_real.sh INTERPOSED_TXT ARCHIVE...}
shift

# Bare calls that are right as they are, each with its reason.
# (None today.)
allow=''

names=$(grep -v '^#' "$list" | tr -s ' \t\n' ' ' | sed 's/@[^ ]*//g')
bad=$(nm -u -A "$@" | awk -v names="$names" -v allow="$allow" '
	BEGIN {
		n = split(names, a, " "); for (i = 1; i <= n; i++) interposed[a[i]] = 1
		n = split(allow, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1
	}
	{ obj = $1; sub(/:$/, "", obj); sym = $NF; sub(/@.*/, "", sym) }
	(sym in interposed) && !(sym in ok) { print "FAIL: " obj " calls " sym " bare: use REAL(" sym ")" }')
if [ -n "$bad" ]; then
	printf '%s\n' "$bad"
	exit 1
fi
echo "PASS: core, shm and fabric call interposed names only through REAL()"
