#!/bin/sh
# container.sh [--mount SRC:DST[:ro]]... [--host "IP NAME"]... [--user UID:GID]
#              [--groups GID,...] [--env K=V]... [--cwd DIR] -- CMD ARGS...
# One "container" for tests/deploy: run it in a fresh mount namespace
# (unshare -m --propagation private) inside the pod's network namespace.
# What a container runtime gives, from Linux primitives:
#   - its own empty /tmp, /run and /opt (tmpfs; a slim image has nothing
#     there), and an /etc of its own (an overlay on the host's, so a mount
#     point such as /etc/shunt can be made and /etc/hosts written without
#     touching the host);
#   - the volumes of the manifest, bind-mounted at their mountPath;
#   - the user of its securityContext (and its supplementalGroups), and an
#     environment holding only PATH, HOME and the variables of the manifest.
# The volumes' sources must not be under /tmp, /run, /opt or /etc (hidden by
# the above).  DEPLOY_WORK: the test's work directory.
set -euf   # -f: no globbing of the environment's values
mounts='' hosts='' user=0:0 groups='' cwd=/tmp
envs="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HOME=/tmp"
while [ $# -gt 0 ]; do
	case $1 in
	--mount) mounts="$mounts
$2"; shift 2 ;;
	--host) hosts="$hosts
$2"; shift 2 ;;
	--user) user=$2; shift 2 ;;
	--groups) groups=$2; shift 2 ;;
	--env) envs="$envs
$2"; shift 2 ;;
	--cwd) cwd=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "container.sh: bad argument $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "container.sh: no command" >&2; exit 2; }

# The overlay's writable layer: in the test's work directory (removed with
# it), not /tmp, which is about to be the container's.
ovl=$(mktemp -d "${DEPLOY_WORK:?}/etc.XXXXXX")
mkdir "$ovl/u" "$ovl/w"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$ovl/u,workdir=$ovl/w" /etc
for d in /tmp /run /opt; do
	mount -t tmpfs -o mode=0755 "container-$(basename $d)" "$d"
done
chmod 1777 /tmp
[ -z "$hosts" ] || printf '%s\n' "$hosts" | sed '/^$/d' >>/etc/hosts

printf '%s\n' "$mounts" | sed '/^$/d' | while IFS=: read -r src dst ro; do
	mkdir -p "$dst"
	mount --bind "$src" "$dst"
	[ "$ro" != ro ] || mount -o remount,bind,ro "$dst"
done

uid=${user%%:*} gid=${user#*:}
cd "$cwd"
old_ifs=$IFS
IFS='
'
# shellcheck disable=SC2086 # one variable per line
set -- env -i $envs "$@"
IFS=$old_ifs
if [ "$uid" = 0 ]; then
	exec "$@"
fi
if [ -n "$groups" ]; then
	exec setpriv --reuid "$uid" --regid "$gid" --groups "$groups" -- "$@"
fi
exec setpriv --reuid "$uid" --regid "$gid" --clear-groups -- "$@"
