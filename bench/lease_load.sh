#!/bin/bash
# What the lease costs the database: an active lead and a standby, idle,
# for 30 s, at --lease 10 and at --lease 3 (the default). Run from the
# repository root as root (the server runs as Debian's postgres user):
#   bench/lease_load.sh [LEAD_BINARY]
set -e
B=/usr/lib/postgresql/15/bin
D=$(mktemp -d)
chown postgres $D
runuser -u postgres -- $B/initdb -D $D/data -U mesh --auth=trust >/dev/null
runuser -u postgres -- $B/pg_ctl -D $D/data -o "-c listen_addresses='' -k $D -c fsync=off" -l $D/log start >/dev/null
sleep 1
psql() { runuser -u postgres -- $B/psql -h $D -U mesh -d "$1" -Atc "$2"; }
LEAD=${1:-target/release/lead}
for lease in 10 3; do
  db=m$lease
  psql postgres "CREATE DATABASE $db" >/dev/null
  url="postgresql://mesh@/$db?host=$D"
  mkdir -p $D/a$lease $D/b$lease
  $LEAD serve --listen 127.0.0.1:0 --http off --state-dir $D/a$lease --store "$url" --lease $lease > $D/a$lease.out 2>&1 &
  pa=$!
  sleep 2
  $LEAD serve --listen 127.0.0.1:0 --http off --state-dir $D/b$lease --store "$url" --lease $lease > $D/b$lease.out 2>&1 &
  pb=$!
  sleep 3
  c0=$(psql $db "SELECT xact_commit FROM pg_stat_database WHERE datname='$db'")
  u0=$(psql $db "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname='lease'")
  sleep 30
  c1=$(psql $db "SELECT xact_commit FROM pg_stat_database WHERE datname='$db'")
  u1=$(psql $db "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname='lease'")
  echo "--lease $lease: $(( (c1-c0) )) transactions in 30 s ($(echo "scale=1; ($c1-$c0)/30" | bc)/s), lease row updated $((u1-u0)) times"
  kill $pa $pb; wait $pa $pb 2>/dev/null || true
done
runuser -u postgres -- $B/pg_ctl -D $D/data stop >/dev/null
