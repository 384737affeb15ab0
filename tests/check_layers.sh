#!/bin/sh
# The layers inside one folder (docs/ARCHITECTURE.md, "The dependency
# rule"): FOLDER/layers.txt names every source file of the folder on one
# line a layer, the bottom first, and a file may use only files on lower
# lines.  Two checks:
#   - calls and data: every symbol a file's object leaves undefined and a
#     sibling's object defines (nm) is defined on a lower layer;
#   - headers: every #include "x.h" of the folder's own names a header of
#     a lower layer or the file's own (x.h goes with x.c; a header without
#     a .c is named in the table itself).
# So the folder's files form a one-way stack: no cycle can hide in it.
#   check_layers.sh SOURCE_DIR BUILD_DIR FOLDER [LIBRARY]
# LIBRARY is the CMake target whose objects are read (shunt_FOLDER).
set -eu
src=${1:?usage: check_layers.sh SOURCE_DIR BUILD_DIR FOLDER [LIBRARY]}
build=${2:?usage}
folder=${3:?usage}
lib=${4:-shunt_$folder}
table=$src/$folder/layers.txt
objdir=$build/$folder/CMakeFiles/$lib.dir
bad=0
fail() {
	echo "FAIL: $*"
	bad=1
}

[ -f "$table" ] || { echo "FAIL: no $folder/layers.txt"; exit 1; }
[ -d "$objdir" ] || { echo "FAIL: no objects in $objdir (build first)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# file -> layer (1 = bottom).  A line: names separated by spaces; '#'
# starts a comment.
n=0
sed 's/#.*//' "$table" | while read -r line; do
	[ -n "$line" ] || continue
	n=$((n + 1))
	for f in $line; do echo "$f $n"; done
done >"$tmp/layer"
layer_of() { awk -v f="$1" '$1 == f { print $2 }' "$tmp/layer"; }

# Every source file of the folder is in the table, once.
for f in "$src/$folder"/*.c "$src/$folder"/*.h; do
	b=$(basename "$f")
	c=$(awk -v f="$b" '$1 == f' "$tmp/layer" | wc -l)
	case $b in
	*.h) [ -e "${f%.h}.c" ] && continue ;; # goes with its .c
	esac
	[ "$c" = 1 ] || fail "$folder/$b: named $c times in $folder/layers.txt (once wanted)"
done
awk '{ print $1 }' "$tmp/layer" | while read -r f; do
	[ -e "$src/$folder/$f" ] || echo "FAIL: $folder/layers.txt names $f, which is not in $folder/"
done >"$tmp/gone"
[ -s "$tmp/gone" ] && { cat "$tmp/gone"; bad=1; }

# Symbols: definer of each global, then each use across files.
: >"$tmp/defs"
for o in "$objdir"/*.o; do
	f=$(basename "$o" .o) # shm_ring.c
	nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print $3, f }' >>"$tmp/defs"
done
for o in "$objdir"/*.o; do
	f=$(basename "$o" .o)
	lf=$(layer_of "$f")
	[ -n "$lf" ] || { fail "$folder/$f: not in $folder/layers.txt"; continue; }
	nm -u "$o" | awk '{ print $NF }' | sort -u >"$tmp/undef"
	awk 'NR == FNR { def[$1] = $2; next } ($1 in def) { print $1, def[$1] }' \
		"$tmp/defs" "$tmp/undef" >"$tmp/uses"
	while read -r sym def; do
		ld=$(layer_of "$def")
		if [ -z "$ld" ] || [ "$ld" -ge "$lf" ]; then
			fail "$folder/$f (layer $lf) uses $sym of $folder/$def (layer ${ld:-?}): only lower layers"
		fi
	done <"$tmp/uses"
done

# Headers.
for f in "$src/$folder"/*.c "$src/$folder"/*.h; do
	b=$(basename "$f")
	case $b in
	*.h) [ -e "${f%.h}.c" ] && owner=${b%.h}.c || owner=$b ;;
	*) owner=$b ;;
	esac
	lf=$(layer_of "$owner")
	[ -n "$lf" ] || continue # said above
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)".*/\1/p' "$f"); do
		[ -e "$src/$folder/$inc" ] || continue
		case $inc in
		*.h) [ -e "$src/$folder/${inc%.h}.c" ] && io=${inc%.h}.c || io=$inc ;;
		*) io=$inc ;;
		esac
		[ "$io" = "$owner" ] && continue
		li=$(layer_of "$io")
		if [ -z "$li" ] || [ "$li" -ge "$lf" ]; then
			fail "$folder/$b (layer $lf) includes $inc (layer ${li:-?}): only lower layers"
		fi
	done
done

[ $bad = 0 ] && echo "PASS: $folder/ is a one-way stack of $(awk 'END { print $2 }' "$tmp/layer") layers"
exit $bad
