#!/bin/sh
# testhooks_map.sh IN OUT: libshunt.so's version script (IN) with the hooks
# of fork_hook.c exported beside shunt's own API, as OUT.
set -e
sed 's/^\([[:space:]]*\)shunt_fd_reason;/&\
\1shunt_test_lock_count;\
\1shunt_test_lock_name;\
\1shunt_test_lock_hold;\
\1shunt_test_locks_free;/' "$1" >"$2.tmp"
grep -q shunt_test_locks_free "$2.tmp"
mv "$2.tmp" "$2"
