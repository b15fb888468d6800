#!/usr/bin/env bash
# A Bazel HTTP remote cache on loopback: Debian's nginx (nginx-light, built with the
# WebDAV module) serving GET/PUT under ROOT. Bazel uses it as
#   --remote_cache=http://127.0.0.1:PORT
#
#   .ci/cache_server.sh start ROOT STATE_DIR   prints the port; nginx runs in the background
#   .ci/cache_server.sh stop STATE_DIR         stops it (by its pid file)
#
# nginx runs with its own config, pid and log files under STATE_DIR, never as the
# system service. Its worker runs as the calling user, so ROOT stays writable.
set -euo pipefail

cmd="${1:-}"
case "$cmd" in
  start)
    root="$2" state="$3"
    mkdir -p "$root" "$state"
    root="$(cd "$root" && pwd)" state="$(cd "$state" && pwd)"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    user_line=""
    [[ "$(id -u)" == 0 ]] && user_line="user root;"
    cat >"$state/nginx.conf" <<CONF
$user_line
worker_processes 2;
pid $state/nginx.pid;
error_log $state/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $state/body;
  proxy_temp_path $state/proxy;
  fastcgi_temp_path $state/fastcgi;
  uwsgi_temp_path $state/uwsgi;
  scgi_temp_path $state/scgi;
  server {
    listen 127.0.0.1:$port;
    root $root;
    location / {
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw group:rw all:r;
      client_max_body_size 0;
    }
  }
}
CONF
    nginx -p "$state" -c "$state/nginx.conf" -e "$state/error.log"
    # Up and writable: one PUT and one GET.
    for _ in $(seq 50); do
      if curl -sf -X PUT --data-binary ok "http://127.0.0.1:$port/health/ping" >/dev/null 2>&1 &&
         [[ "$(curl -sf "http://127.0.0.1:$port/health/ping")" == ok ]]; then
        echo "$port"
        exit 0
      fi
      sleep 0.1
    done
    echo "cache_server: nginx on 127.0.0.1:$port does not answer PUT/GET; see $state/error.log" >&2
    exit 1
    ;;
  stop)
    state="$2"
    if [[ -f "$state/nginx.pid" ]]; then
      kill "$(cat "$state/nginx.pid")" 2>/dev/null || true
    fi
    ;;
  *)
    echo "usage: $0 start ROOT STATE_DIR | stop STATE_DIR" >&2
    exit 2
    ;;
esac
