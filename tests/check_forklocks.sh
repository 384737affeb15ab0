#!/bin/sh
# Every lock the threads of a process share is taken across fork()
# (core/shunt_forklock.h): each static pthread_mutex_t of core/, shm/ and
# fabric/ has its SHUNT_FORK_MUTEX (SHUNT_FORK_OWN where the file's own
# atfork handlers take it), each connection pool (SHUNT_CONN_POOL)
# its pool.mu.  A lock added without one would be left held in a forked
# child by whichever thread had it.
#   check_forklocks.sh SOURCE_DIR
set -eu
root=${1:?usage: check_forklocks.sh SOURCE_DIR}
bad=0
for f in "$root"/core/*.c "$root"/shm/*.c "$root"/fabric/*.c; do
	for mu in $(sed -n 's/^static pthread_mutex_t \([a-z_]*\) .*/\1/p' "$f"); do
		grep -q -e "^SHUNT_FORK_MUTEX($mu," -e "^SHUNT_FORK_OWN($mu);" "$f" ||
			{ echo "FAIL: $f: mutex $mu is not registered (SHUNT_FORK_MUTEX)"; bad=1; }
	done
	if grep -q '= SHUNT_CONN_POOL(' "$f" && ! grep -q '^SHUNT_FORK_MUTEX(pool\.mu,' "$f"; then
		echo "FAIL: $f: its connection pool's mutex is not registered"
		bad=1
	fi
done
[ $bad -eq 0 ] && echo "PASS: every mutex of core, shm and fabric is taken across fork()"
exit $bad
