# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests that need a ZooKeeper of their own (Debian's zookeeperd, ZooKeeper 3.8, for
# ClickHouse's ReplicatedMergeTree): one standalone server in TMPDIR/zk on a free loopback port,
# run with java from the package's own jar (its manifest's Class-Path names the jars it needs
# in /usr/share/java; slf4j-nop keeps it quiet), not through the system service.
#   zk_start        sets zk_port and zk_pid; 0 once it answers "ruok" with "imok", non-zero
#                   (with zk_why) when it is not installed or did not within 60 s
#   zk_stop         kill -9s it (the caller's EXIT trap calls it)
# Needs lib/clickhouse.sh's ch_free_port (sourced first).
ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
zk_ruok() { # "imok" when the server on zk_port answers
  (exec 3<>"/dev/tcp/127.0.0.1/$zk_port" && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null
}
zk_start() {
  local d="$TMPDIR/zk" k
  zk_why=
  if ! command -v java >/dev/null || [ ! -f "$ZK_JAR" ]; then
    zk_why="ZooKeeper is not installed (no java or no $ZK_JAR: apt-get install zookeeperd, scripts/deps.sh check)"
    return 1
  fi
  ch_free_port; zk_port=$ch_port
  rm -rf "$d"; mkdir -p "$d/data"
  # tickTime 500 ms: sessions of the ClickHouses expire within seconds of a kill, not 30 s;
  # the admin server (Jetty, port 8080) off; "ruok" allowed, which is how we poll it
  cat >"$d/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
CFG
  java -Xmx256m -cp "$ZK_JAR:/usr/share/java/slf4j-nop.jar" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$d/zoo.cfg" >"$d/out.log" 2>&1 &
  zk_pid=$!
  for ((k = 0; k < 300; k++)); do
    [ "$(zk_ruok)" = imok ] && return 0
    kill -0 "$zk_pid" 2>/dev/null || break
    sleep 0.2
  done
  zk_why="ZooKeeper did not answer on 127.0.0.1:$zk_port: $(tail -3 "$d/out.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
  return 1
}
zk_stop() { [ -n "${zk_pid:-}" ] || return 0; kill -9 "$zk_pid" 2>/dev/null; wait "$zk_pid" 2>/dev/null; zk_pid=; }
