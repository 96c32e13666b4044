# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests and benchmarks that need ClickHouse servers of their own (Debian's
# clickhouse-server 18.16), each in a directory of TMPDIR on free loopback ports, all members of
# one cluster named "strobe" with one shard per server (remote_servers in each one's config).
#   ch_start N                  starts servers 1..N; sets ch_http[i], ch_tcp[i], ch_pid[i];
#                               0 once each answers /ping, non-zero (with ch_why) when one did
#                               not within 60 s
#   ch_stop I / ch_kill I       stops (SIGTERM, waited) / kill -9s server I
#   ch_restart I                starts server I again on its ports and data
#   ch_url I [I...]             the strobe --store URL for the servers given (tried in order)
#   ch_strobe NAME DATA OPTS... a strobe server ($STROBE, through lib/server.sh's launch_server,
#                               which the caller sources) on data dir DATA with OPTS (a
#                               --store for ClickHouse); sets url_NAME and pid_NAME and adds the pid to the
#                               caller's pids array (its EXIT trap kills them); a FAIL
#                               $name/start-NAME line with the log, and exit, when it does not
#                               come up
# With ch_zk_port set (lib/zookeeper.sh's zk_port) before ch_start, the N servers are instead N
# replicas of ONE shard (macros shard=01, replica=rI; internal_replication), kept by that
# ZooKeeper, for ReplicatedMergeTree tables (a store URL with replicated=1).
# The caller's EXIT trap calls ch_cleanup.
ch_free_port() { # sets ch_port to a loopback port nobody listens on and none of ours has
  # (random, checked with bash's /dev/tcp; no subshell, which would repeat $RANDOM)
  while :; do
    ch_port=$((10000 + RANDOM % 22000)) # below the ephemeral range (32768+)
    [[ " ${ch_taken:-} " == *" $ch_port "* ]] && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$ch_port") 2>/dev/null && continue
    ch_taken+=" $ch_port"
    return
  done
}
ch_config() { # $1 = index, $2 = number of servers
  local i=$1 n=$2 d="$TMPDIR/ch$1" k shards= repl=
  for ((k = 1; k <= n; k++)); do
    if [ -n "${ch_zk_port:-}" ]; then repl+="<replica><host>127.0.0.1</host><port>${ch_tcp[$k]}</port></replica>"
    else shards+="<shard><replica><host>127.0.0.1</host><port>${ch_tcp[$k]}</port></replica></shard>"; fi
  done
  if [ -n "${ch_zk_port:-}" ]; then
    shards="<shard><internal_replication>true</internal_replication>$repl</shard>"
    # replicas fetch each other's parts over the interserver HTTP port
    repl="<zookeeper><node><host>127.0.0.1</host><port>$ch_zk_port</port></node><session_timeout_ms>6000</session_timeout_ms></zookeeper>
  <macros><shard>01</shard><replica>r$i</replica></macros>
  <interserver_http_port>${ch_inter[$i]}</interserver_http_port><interserver_http_host>127.0.0.1</interserver_http_host>"
  fi
  rm -rf "$d" # a fresh server, even when TMPDIR is reused
  mkdir -p "$d/data/" "$d/tmp/"
  cat >"$d/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$d/server.log</log><errorlog>$d/error.log</errorlog><size>10M</size><count>1</count></logger>
  <http_port>${ch_http[$i]}</http_port>
  <tcp_port>${ch_tcp[$i]}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$d/data/</path>
  <tmp_path>$d/tmp/</tmp_path>
  <format_schema_path>$d/</format_schema_path>
  <users_config>$d/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <remote_servers><strobe>$shards</strobe></remote_servers>
  $repl
</yandex>
XML
  cat >"$d/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage><log_queries>0</log_queries></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}
ch_launch() { # $1 = index: starts it and waits for /ping
  local i=$1 d="$TMPDIR/ch$1" k
  (cd "$d" && exec clickhouse-server --config-file="$d/config.xml" >"$d/stdout.log" 2>&1) &
  ch_pid[$i]=$!
  for ((k = 0; k < 1200; k++)); do
    curl -sf "http://127.0.0.1:${ch_http[$i]}/ping" >/dev/null 2>&1 && return 0
    kill -0 "${ch_pid[$i]}" 2>/dev/null || break
    sleep 0.05
  done
  ch_why="clickhouse-server $i did not answer on 127.0.0.1:${ch_http[$i]}: $(tail -3 "$d/error.log" "$d/stdout.log" 2>/dev/null | tr '\n' ' ' | cut -c1-400)"
  return 1
}
ch_start() {
  local n=$1 i
  ch_why=
  command -v clickhouse-server >/dev/null || { ch_why="clickhouse-server is not installed (scripts/deps.sh check)"; return 1; }
  for ((i = 1; i <= n; i++)); do ch_free_port; ch_http[$i]=$ch_port; ch_free_port; ch_tcp[$i]=$ch_port; ch_free_port; ch_inter[$i]=$ch_port; done
  for ((i = 1; i <= n; i++)); do ch_config "$i" "$n"; done
  for ((i = 1; i <= n; i++)); do ch_launch "$i" || return 1; done
}
ch_stop() { local i=$1; [ -n "${ch_pid[$i]:-}" ] || return 0; kill "${ch_pid[$i]}" 2>/dev/null; wait "${ch_pid[$i]}" 2>/dev/null; ch_pid[$i]=; }
ch_kill() { local i=$1; [ -n "${ch_pid[$i]:-}" ] || return 0; kill -9 "${ch_pid[$i]}" 2>/dev/null; wait "${ch_pid[$i]}" 2>/dev/null; ch_pid[$i]=; }
ch_restart() { ch_launch "$1"; }
ch_url() { local h= i; for i in "$@"; do h+="${h:+,}127.0.0.1:${ch_http[$i]}"; done; echo "clickhouse://$h/strobe?cluster=strobe"; }
ch_cleanup() { local i; for i in "${!ch_pid[@]}"; do [ -n "${ch_pid[$i]}" ] && kill -9 "${ch_pid[$i]}" 2>/dev/null; done; wait 2>/dev/null; }
ch_sql() { # $1 = index, $2 = SQL: the answer (TSV) on stdout
  curl -sf "http://127.0.0.1:${ch_http[$1]}/" --data-binary "$2"
}
ch_strobe() {
  local n=$1 d=$2
  shift 2
  launch_server "$STROBE" "$d" "$@" || { echo "FAIL $name/start-$n: $(head -c 600 "$TMPDIR/log")"; exit 1; }
  pids+=("$pid")
  eval "url_$n=\$url pid_$n=\$pid"
  pid=
}
