#!/usr/bin/env bash
# nginx (master + 2 forked workers, epoll, sendfile) serving a 64 MiB random
# file, fetched by curl: twice over one keep-alive connection and once as a
# range request; everything compared by SHA-256 with the file and with the
# run without shunt.  Under shunt the accepts must be decided in the worker
# processes.
source "$(dirname "$0")/lib.sh"
need nginx curl

SIZE=$((${E2E_NGINX_MIB:-64} * 1024 * 1024))
mkdir -p "$TMP/www"
random_file "$TMP/www/big.bin" "$SIZE"
want=$(sha256 "$TMP/www/big.bin")
want_range=$(dd if="$TMP/www/big.bin" bs=1000000 skip=1 count=5 status=none | sha256)
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user root root;"   # workers write shunt logs into $TMP

for MODE in plain shunt; do
	phase "$MODE"
	port=$(free_port)
	mkdir -p "$PDIR/nginx"
	cat >"$PDIR/nginx.conf" <<-CONF
		$user_line
		worker_processes 2;
		daemon off;
		master_process on;
		pid $PDIR/nginx/nginx.pid;
		error_log $PDIR/nginx/error.log warn;
		events { worker_connections 256; use epoll; }
		http {
		    access_log $PDIR/nginx/access.log;
		    client_body_temp_path $PDIR/nginx/body;
		    proxy_temp_path $PDIR/nginx/proxy;
		    fastcgi_temp_path $PDIR/nginx/fastcgi;
		    uwsgi_temp_path $PDIR/nginx/uwsgi;
		    scgi_temp_path $PDIR/nginx/scgi;
		    sendfile on;
		    tcp_nopush on;
		    keepalive_timeout 30;
		    default_type application/octet-stream;
		    server {
		        listen 127.0.0.1:$port;
		        listen [::1]:$port;
		        root $TMP/www;
		    }
		}
	CONF
	bg nginx nginx -p "$PDIR/nginx" -e "$PDIR/nginx/error.log" -c "$PDIR/nginx.conf"
	npid=$BG_PID
	wait_port "$port" "$npid"
	url=http://127.0.0.1:$port/big.bin
	runx curl -sS --fail -o "$PDIR/get1" -o "$PDIR/get2" "$url" "$url" \
		-w '%{http_code} %{num_connects} %{size_download}\n' >"$PDIR/curl.out" 2>"$PDIR/curl.err" ||
		die "curl failed ($MODE): $(cat "$PDIR/curl.err")"
	runx curl -sS --fail -r 1000000-5999999 -o "$PDIR/range" "http://[::1]:$port/big.bin" \
		-w '%{http_code} %{num_connects} %{size_download}\n' >>"$PDIR/curl.out" 2>>"$PDIR/curl.err" ||
		die "curl range failed ($MODE): $(cat "$PDIR/curl.err")"
	assert_eq "$(sha256 "$PDIR/get1")" "$want" "first download ($MODE)"
	assert_eq "$(sha256 "$PDIR/get2")" "$want" "second download on the kept-alive connection ($MODE)"
	assert_eq "$(sha256 "$PDIR/range")" "$want_range" "range download ($MODE)"
	# 200 on one new connection, then 200 on none (reused), then 206
	printf '200 1 %d\n200 0 %d\n206 1 5000000\n' "$SIZE" "$SIZE" >"$PDIR/curl.expect"
	assert_same_file "$PDIR/curl.out" "$PDIR/curl.expect" "curl status/connection counts ($MODE)"
	if [[ $MODE == shunt ]]; then
		master=$(bg_prog_pid "$npid")
		assert_preloaded "$master"
	fi
	stop "$npid"
	rm -f "$PDIR/get1" "$PDIR/get2" "$PDIR/range"
done
assert_same_file "$TMP/plain/curl.out" "$TMP/shunt/curl.out" "curl results plain vs shunt"

phase shunt
check_logs
assert_started curl
assert_log_count "$(conn_re 'curl' client)" 2
assert_log_count "$(conn_re 'nginx' server)" 2
assert_conn_pairs 2
assert_log_has 'role=client local=\[?::1\]?:[0-9]+ ' 1
[[ ${E2E_TRANSPORT:-} == kernel ]] || assert_log_lacks 'reason=rule-kernel$'
# accepted in the workers, not in the master
assert_log_pids 'nginx: debug: conn .* role=server' 1
if log_lines 'role=server' | grep -q "^shunt\[$master\]"; then
	die "accepts logged under the nginx master's pid $master"
fi

# A program-glob rule for nginx applies in its workers too (whatever nginx
# does to its process title).
phase rule shunt
port=$(free_port)
sed -e "s/:$(grep -o 'listen 127.0.0.1:[0-9]*' "$TMP/shunt/nginx.conf" | cut -d: -f2);/:$port;/" \
	-e "s|$TMP/shunt/|$PDIR/|g" "$TMP/shunt/nginx.conf" >"$PDIR/nginx.conf"
mkdir -p "$PDIR/nginx"
printf 'kernel server nginx *\n' >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf bg nginx nginx -p "$PDIR/nginx" -e "$PDIR/nginx/error.log" -c "$PDIR/nginx.conf"
npid=$BG_PID
wait_port "$port" "$npid"
runx curl -sS --fail -r 0-99999 -o "$PDIR/part" "http://127.0.0.1:$port/big.bin" 2>"$PDIR/curl.err" ||
	die "curl failed (rule): $(cat "$PDIR/curl.err")"
assert_eq "$(sha256 "$PDIR/part")" "$(head -c 100000 "$TMP/www/big.bin" | sha256)" "range download (rule)"
stop "$npid"
check_logs
assert_log_count "$(conn_re nginx server kernel rule-kernel)" 1
compat_row "nginx (epoll, sendfile) + curl" "$(nginx -v 2>&1 | sed "s/.*nginx\///"), curl $(curl --version | awk "NR == 1 { print \$2 }")" "pass" "pass, same SHA-256"
pass
