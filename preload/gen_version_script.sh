#!/bin/sh
# Writes libshunt's linker version script.
#
# A preloaded definition only interposes a versioned reference (read@GLIBC_2.2.5)
# when it carries the same version, so each interposed function is put in the
# version node under which this system's libc defines it by default; a name
# written name@VERSION (another library's function) goes in the node it names.
# shunt's own API lives in SHUNT_1.  Usage: gen_version_script.sh LIBC LIST OUT
set -eu
libc=$1 list=$2 out=$3
syms=$(grep -v '^#' "$list" | tr -s ' \n' '\n' | grep -v '^$')
readelf --dyn-syms -W "$libc" | awk -v syms="$syms" '
	BEGIN {
		n = split(syms, s, "\n")
		for (i = 1; i <= n; i++) {
			if (split(s[i], p, "@") == 2) { ver[p[1]] = p[2]; fixed[p[1]] = 1 }
			want[p[1]] = 1
		}
	}
	$8 ~ /@@/ { split($8, p, "@@"); if ((p[1] in want) && !(p[1] in fixed)) { ver[p[1]] = p[2] } }
	END {
		for (name in want) {
			if (!(name in ver)) { print "missing from libc: " name > "/dev/stderr"; exit 1 }
			nodes[ver[name]] = nodes[ver[name]] "\t\t" name ";\n"
		}
		for (v in nodes) printf "%s {\n\tglobal:\n%s};\n", v, nodes[v]
		print "SHUNT_1 {\n\tglobal:\n\t\tshunt_version;\n\t\tshunt_enabled;\n\t\tshunt_fd_transport;\n\t\tshunt_fd_reason;\n\tlocal:\n\t\t*;\n};"
	}' > "$out.tmp"
mv "$out.tmp" "$out"
