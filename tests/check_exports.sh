#!/bin/sh
# libshunt.so exports exactly the interposed libc functions, each under the
# version node libc gives it, and shunt's API under SHUNT_1; nothing else.
# Usage: check_exports.sh LIBSHUNT INTERPOSED_TXT LIBC
set -eu
lib=$1 list=$2 libc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# name, or name@VERSION for another library's function (its node is given)
grep -v '^#' "$list" | tr -s ' \n' '\n' | grep -v '^$' | sort > "$tmp/list"
sed 's/@.*//' "$tmp/list" > "$tmp/want"
# name@@version of every defined function
readelf --dyn-syms -W "$lib" | awk '$4 == "FUNC" && $7 != "UND" { print $8 }' | sort > "$tmp/have"
fail=0
while read -r s; do
	case $s in
	*@*) v=${s#*@} s=${s%%@*} ;;
	*) v=$(readelf --dyn-syms -W "$libc" | awk -v s="$s" '$8 ~ ("^" s "@@") { split($8, p, "@@"); print p[2] }') ;;
	esac
	if ! grep -qx "$s@@$v" "$tmp/have"; then
		echo "FAIL: $s is not exported as $s@@$v"; fail=1
	fi
done < "$tmp/list"
for s in shunt_version shunt_enabled shunt_fd_transport shunt_fd_reason; do
	grep -qx "$s@@SHUNT_1" "$tmp/have" || { echo "FAIL: $s@@SHUNT_1 missing"; fail=1; }
done
extra=$(sed 's/@@.*//' "$tmp/have" | grep -vxF -f "$tmp/want" | grep -v '^shunt_\(version\|enabled\|fd_transport\|fd_reason\)$' || true)
if [ -n "$extra" ]; then
	echo "FAIL: unexpected exports:"; echo "$extra"; fail=1
fi
n=$(wc -l < "$tmp/have")
[ "$fail" = 0 ] && echo "exports ok: $n functions"
exit $fail
