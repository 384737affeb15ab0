#!/bin/sh
# The dependency rule (docs/ARCHITECTURE.md, "Parts"): which folders each
# folder's #include "..." lines may name.  A bare name is the file's own
# folder.  The build enforces the same with include views (shunt_view in
# CMakeLists.txt); this says it in one place and catches what a view would
# let through (a relative "../", a file of a folder the view shows whole).
#   check_deps.sh SOURCE_DIR
set -eu
src=${1:?usage: check_deps.sh SOURCE_DIR}
cd "$src"

# FILES-GLOB  OWN (the bare names it may include)  ALLOWED (folder/ for a
# whole folder, folder/file.h for one file)
rules='
config/*        *         config/
core/*          *         core/ config/
agent/agent_*   agent_*   config/
agent/shuntd*   *         agent/ core/ config/ bpf/shunt_sockmap.skel.h
shm/*           *         shm/ core/ config/
fabric/*        *         fabric/ core/ config/ agent/agent_proto.h agent/agent_hmac.h agent/agent_client.h
preload/*       *         preload/ core/ config/
tools/*         *         tools/ core/ config/ bench/bench_util.h agent/agent_proto.h agent/agent_client.h
bench/*         *         bench/ shm/shm_ring.h
bpf/*           *         core/shunt_sockmap_abi.h
'

bad=0
for f in config/* core/* agent/* shm/* fabric/* preload/* tools/* bench/* bpf/*; do
	case $f in *.c | *.h) ;; *) continue ;; esac
	rule=$(printf '%s\n' "$rules" | while read -r glob rest; do
		[ -n "$glob" ] || continue
		# shellcheck disable=SC2254 # the glob is the pattern
		case $f in $glob) echo "$rest"; break ;; esac
	done)
	own=${rule%% *}
	# shellcheck disable=SC2086 # split the list, trimmed
	set -- ${rule#* }
	allowed="$*"
	if [ -z "$rule" ]; then
		echo "FAIL: $f: no rule for its folder"
		bad=1
		continue
	fi
	dir=${f%%/*}
	# shellcheck disable=SC2013 # include names have no spaces
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		shunt/*) continue ;; # the public API, everyone's
		*/*) ;;
		*)
			# shellcheck disable=SC2254 # own is a pattern
			case $inc in $own) [ -e "$dir/$inc" ] && continue ;; esac
			echo "FAIL: $f includes \"$inc\": not one of $dir/$own"
			bad=1
			continue
			;;
		esac
		ok=0
		for a in $allowed; do
			case $a in
			*/) case $inc in "$a"*) ok=1 ;; esac ;;
			*) [ "$inc" = "$a" ] && ok=1 ;;
			esac
		done
		case $inc in *..*) ok=0 ;; esac
		if [ $ok = 0 ]; then
			echo "FAIL: $f includes \"$inc\": $dir/ may include only $allowed"
			bad=1
		fi
	done
done
[ $bad = 0 ] && echo "PASS: every #include keeps the dependency rule"
exit $bad
