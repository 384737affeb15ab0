#!/usr/bin/env bash
# The shunt front end and shunt config --show:
#  * no command is a usage error (exit 2, usage on stderr, nothing on
#    stdout); 'shunt help COMMAND' is that command's --help; an unknown
#    topic is a usage error;
#  * config --show prints every key of the configuration's key table with
#    where its value came from (file:line, a SHUNT_<KEY> variable,
#    SHUNT_OPTIONS, default), never a secret's value, and the rundir in use
#    with why;
#  * shunt bench --plot FILE.png without rsvg-convert fails before measuring.
#   SHUNT=build/tools/shunt bash tests/tools/tool_cli.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
export LC_ALL=C
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: tool_cli: $*"; exit 1; }

rc=0
"$SHUNT" >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 && ! -s "$tmp/out" ]] || fail "no command: exit $rc, stdout '$(head -c 200 "$tmp/out")'"
grep -q '^usage: shunt <command>' "$tmp/err" || fail "no command: no usage on stderr"
"$SHUNT" help stat >"$tmp/out" || fail "shunt help stat failed"
"$SHUNT" stat --help >"$tmp/want" || fail "shunt stat --help failed"
cmp -s "$tmp/out" "$tmp/want" || fail "shunt help stat is not shunt stat --help"
"$SHUNT" help ab | grep -q -- '--warmup N' || fail "shunt help ab"
"$SHUNT" help >"$tmp/out" && grep -q '^usage: shunt <command>' "$tmp/out" || fail "shunt help"
rc=0
"$SHUNT" help frobnicate >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "unknown command 'frobnicate'" "$tmp/err" || fail "shunt help frobnicate: exit $rc"
echo "tool_cli: no command, help TOPIC"

# config --show: a file, a variable and SHUNT_OPTIONS, each named as the source.
secret=s3cret-0123456789abcdef
printf '# test\nspin_us = 5\nring_size = 64k\nkernel client * *:22\n' >"$tmp/shunt.conf"
SHUNT_CONFIG=$tmp/shunt.conf SHUNT_RING_SIZE=128k SHUNT_RUNDIR=$tmp/run \
	SHUNT_OPTIONS="log=info,agent_secret=$secret" "$SHUNT" config --show >"$tmp/show" ||
	fail "config --show failed"
cat "$tmp/show"
grep -q -- "$secret" "$tmp/show" && fail "config --show printed the secret"
want=$(printf '%s\n' \
	"enable = yes # default" \
	"log = info # SHUNT_OPTIONS: item 1" \
	'log_file = "" # default' \
	"rundir = $tmp/run # SHUNT_RUNDIR" \
	'shm_group = "" # default' \
	"spin_us = 5 # $tmp/shunt.conf:2" \
	"spin_max_us = 100 # default" \
	"ring_size = 128k # SHUNT_RING_SIZE" \
	"cma_min = 0 # default" \
	"fabric_provider = auto # default" \
	"fabric_load_wait_ms = 0 # default" \
	"agent_port = 7476 # default" \
	"default_transport = auto # default" \
	"offer_timeout_ms = 500 # default" \
	"agent_secret = (set) # SHUNT_OPTIONS: item 2" \
	'agent_secret_file = "" # default' \
	"agent_cache_s = 30 # default" \
	"agent_timeout_ms = 250 # default" \
	'countersign_key_file = "" # default' \
	"sockmap = off # default" \
	'sockmap_cgroup = "" # default' \
	"sockmap_pin = /sys/fs/bpf/shunt # default")
got=$(grep -v '^#' "$tmp/show" | grep -v '^rule ' | sed 's/  *#/ #/')
[[ "$got" == "$want" ]] || fail "config --show keys:
$got
expected:
$want"
grep -q "^# rundir in use: $tmp/run: the rundir setting; none is there yet" "$tmp/show" ||
	fail "config --show: no rundir line with its reason"
grep -q '^rule kernel client \* \*:22    # line 4$' "$tmp/show" || fail "config --show: the rule"
echo "tool_cli: config --show: every key, its source, no secret, the rundir and why"

# --plot FILE.png needs rsvg-convert: said before the run, not after it.
mkdir "$tmp/bin"
for p in sh env; do ln -s "$(command -v $p)" "$tmp/bin/$p"; done
rc=0
PATH=$tmp/bin "$SHUNT" bench --plot "$tmp/x.png" >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] || fail "bench --plot x.png without rsvg-convert: exit $rc"
grep -q 'drawing a PNG needs rsvg-convert on PATH' "$tmp/err" || fail "bench --plot: $(cat "$tmp/err")"
grep -q 'round' "$tmp/err" && fail "bench --plot: measured before failing"
echo "tool_cli: ok"
