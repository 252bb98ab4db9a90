#!/usr/bin/env bash
# A replicated venue on one machine (docs/replication.md): a 3-node NATS
# cluster (nats-server processes, JetStream, R=3), a primary and a standby
# exchange in sync mode; it places an order on the primary, reads it on the
# standby, promotes the standby and shows the old primary refusing writes.
# Everything binds 127.0.0.1 and is stopped by PID on exit.
#
#   scripts/replica-demo.sh            (make replica-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
NATS=${NATS_SERVER:-nats-server}
command -v "$NATS" >/dev/null || { echo "replica-demo: no nats-server binary (set NATS_SERVER)"; exit 1; }
DIR=$(mktemp -d /tmp/ubs-replica-demo-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

go build -o "$DIR/exchange" ./cmd/exchange
ROUTES=nats://127.0.0.1:16222,nats://127.0.0.1:16223,nats://127.0.0.1:16224
for i in 0 1 2; do
  "$NATS" -a 127.0.0.1 -p $((14222 + i)) -js -sd "$DIR/nats$i" -n "n$i" \
    --cluster_name ubs-demo --cluster nats://127.0.0.1:$((16222 + i)) --routes "$ROUTES" >"$DIR/nats$i.log" 2>&1 &
  PIDS+=($!)
done
URL=nats://127.0.0.1:14222,nats://127.0.0.1:14223,nats://127.0.0.1:14224
SECRET=demo-secret-0123456789abcdef0123456789abcdef
start() { # name http role
  "$DIR/exchange" --http "$2" --data-dir "$DIR/$1" --pg-url none --jwt-secret "$SECRET" --replication sync \
    --replication-url "$URL" --replication-replicas 3 --node-id "$1" --role "$3" >"$DIR/$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 200); do curl -sf "http://$2/health/ready" >/dev/null && return; sleep 0.1; done
  echo "replica-demo: $1 not ready"; cat "$DIR/$1.log"; exit 1
}
start a 127.0.0.1:18080 primary
start b 127.0.0.1:18081 standby
ADMIN=$("$DIR/exchange" token --user 1000 --admin --jwt-secret "$SECRET")
USER=$("$DIR/exchange" token --user 1 --jwt-secret "$SECRET")
say() { echo; echo "== $*"; }
say "fund user 1 and place an order on the primary (a)"
curl -s -H "Authorization: Bearer $ADMIN" -d '{"user_id":1,"asset":"USDT","amount":"1000","ref":"demo"}' http://127.0.0.1:18080/admin/v1/adjust; echo
curl -s -H "Authorization: Bearer $USER" -d '{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"40000","quantity":"0.001"}' http://127.0.0.1:18080/api/v1/order; echo
sleep 0.5
say "read the book on the standby (b): same state, X-Ubs-Seq says at which seq"
curl -s -i -H "Authorization: Bearer $USER" http://127.0.0.1:18081/api/v1/depth/BTC-USDT | grep -i -e '^x-ubs' -e '^{'
say "a write on the standby: 503 NOT_PRIMARY, naming the primary"
curl -s -H "Authorization: Bearer $USER" -d '{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"40000","quantity":"0.001"}' http://127.0.0.1:18081/api/v1/order; echo
say "promote the standby"
curl -s -X POST -H "Authorization: Bearer $ADMIN" http://127.0.0.1:18081/admin/v1/replication/promote; echo
for _ in $(seq 1 200); do curl -sf http://127.0.0.1:18081/health/ready >/dev/null && break; sleep 0.1; done
say "the new primary (b) takes writes"
curl -s -H "Authorization: Bearer $USER" -d '{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"40001","quantity":"0.001"}' http://127.0.0.1:18081/api/v1/order; echo
say "the old primary (a) is fenced by its next append: it acknowledges nothing more"
for _ in 1 2; do
  curl -s -H "Authorization: Bearer $USER" -d '{"market":"BTC-USDT","side":"SELL","type":"LIMIT","time_in_force":"GTC","price":"50000","quantity":"0.001"}' http://127.0.0.1:18080/api/v1/order; echo
done
say "replication state of b"
curl -s -H "Authorization: Bearer $ADMIN" http://127.0.0.1:18081/admin/v1/replication; echo
