#!/usr/bin/env bash
# Automatic failover on one machine (docs/replication.md, "Automatic
# failover"): a 3-node NATS cluster (nats-server processes, JetStream, R=3)
# and three exchanges started alike with --failover auto. One takes the
# lease and serves; the primary is killed (SIGKILL) and another takes over
# (the time to its first acknowledged write is printed); the killed node is
# restarted and rejoins as a standby; a standby's data dir is wiped and it
# bootstraps from the snapshot bucket. Everything binds 127.0.0.1 and is
# stopped by PID on exit.
#
#   scripts/failover-demo.sh            (make failover-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
NATS=${NATS_SERVER:-nats-server}
command -v "$NATS" >/dev/null || { echo "failover-demo: no nats-server binary (set NATS_SERVER)"; exit 1; }
DIR=$(mktemp -d /tmp/ubs-failover-demo-XXXXXX)
declare -A PID PORT=([a]=18180 [b]=18181 [c]=18182)
NPIDS=()
cleanup() {
  for p in "${PID[@]}" "${NPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

go build -o "$DIR/exchange" ./cmd/exchange
ROUTES=nats://127.0.0.1:16322,nats://127.0.0.1:16323,nats://127.0.0.1:16324
for i in 0 1 2; do
  "$NATS" -a 127.0.0.1 -p $((14322 + i)) -js -sd "$DIR/nats$i" -n "n$i" \
    --cluster_name ubs-failover-demo --cluster nats://127.0.0.1:$((16322 + i)) --routes "$ROUTES" >"$DIR/nats$i.log" 2>&1 &
  NPIDS+=($!)
done
URL=nats://127.0.0.1:14322,nats://127.0.0.1:14323,nats://127.0.0.1:14324
SECRET=demo-secret-0123456789abcdef0123456789abcdef
start() { # name
  "$DIR/exchange" --http "127.0.0.1:${PORT[$1]}" --data-dir "$DIR/$1" --pg-url none --jwt-secret "$SECRET" \
    --replication sync --replication-url "$URL" --replication-replicas 3 --failover auto --node-id "$1" \
    --snapshot-every 50 >>"$DIR/$1.log" 2>&1 &
  PID[$1]=$!
}
ready() { for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:${PORT[$1]}/health/ready" >/dev/null && return; sleep 0.1; done
  echo "failover-demo: $1 not ready"; cat "$DIR/$1.log"; exit 1; }
ADMIN=$("$DIR/exchange" token --user 1000 --admin --jwt-secret "$SECRET")
USER=$("$DIR/exchange" token --user 1 --jwt-secret "$SECRET")
ORDER='{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"40000","quantity":"0.001"}'
status() { curl -s -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:${PORT[$1]}/admin/v1/replication"; }
primary() { for n in a b c; do [ -n "${PID[$n]:-}" ] && status "$n" 2>/dev/null | grep -q '"role":"primary"' && { echo "$n"; return; }; done; }
say() { echo; echo "== $*"; }

for n in a b c; do start "$n"; done
for n in a b c; do ready "$n"; done
for _ in $(seq 1 100); do P=$(primary); [ -n "$P" ] && break; sleep 0.1; done
say "three nodes started alike; the lease went to $P"
for n in a b c; do echo "$n: $(status "$n")"; done
say "fund user 1 and place orders on the primary ($P)"
curl -s -H "Authorization: Bearer $ADMIN" -d '{"user_id":1,"asset":"USDT","amount":"100000","ref":"demo"}' "http://127.0.0.1:${PORT[$P]}/admin/v1/adjust"; echo
for _ in $(seq 1 60); do curl -s -o /dev/null -H "Authorization: Bearer $USER" -d "$ORDER" "http://127.0.0.1:${PORT[$P]}/api/v1/order"; done
say "SIGKILL the primary ($P); writes go to whichever node answers 200"
kill -9 "${PID[$P]}"; wait "${PID[$P]}" 2>/dev/null || true; unset "PID[$P]"
t0=$(date +%s%N)
while :; do
  for n in a b c; do
    [ "$n" = "$P" ] && continue
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 1 -H "Authorization: Bearer $USER" -d "$ORDER" "http://127.0.0.1:${PORT[$n]}/api/v1/order" || true)
    [ "$code" = 200 ] && { NEW=$n; break 2; }
  done
  sleep 0.01
done
echo "$NEW took over: first acknowledged write $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill"
say "restart the killed node ($P): it discards what the log lacks and rejoins as a standby"
start "$P"; ready "$P"; sleep 1
echo "$P: $(status "$P")"
grep -h '"msg":"replication: rejoining as a standby"' "$DIR/$P.log" | tail -1
W=$(for n in a b c; do [ "$n" != "$NEW" ] && [ "$n" != "$P" ] && echo "$n"; done)
say "wipe the other standby ($W): it bootstraps from the newest snapshot in the bucket"
kill -9 "${PID[$W]}"; wait "${PID[$W]}" 2>/dev/null || true
rm -rf "${DIR:?}/$W"
start "$W"; ready "$W"; sleep 1
grep -h '"msg":"replication: bootstrapping' "$DIR/$W.log" | tail -1
for n in a b c; do echo "$n: $(status "$n")"; done
