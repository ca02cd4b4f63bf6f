#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A damaged ledger stops gpumd before it is ready: exit 1, a message on stderr that names the
# file, what is wrong and the way out (a backup, docs/operations.md), and the ledger left as it
# was. Damage here: a 0-byte ledger.db (truncated, a bad restore), a database without gpumd's
# schema, one that fails SQLite's integrity check, a ledger.db deleted beside its log, one byte
# flipped in a label or a token (SQLite calls the file sound; the row breaks the protocol's
# rules: the message names the row and the field). Only a
# state directory without a ledger starts a new one; a ledger restored from a backup goes on
# with the ids above the backup's highest (none is reused).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
DB="$GPUM_STATE_DIR/ledger.db"
BACKUP="$T_SCRATCH/backup.db"

[ ! -e "$DB" ] || t_fail "the state directory is not new"
gd_start
gd_py '
c = Client()
for i in range(3):
    c.ok("release", reservation=c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]["id"])
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=3600000, label="notebook")
r = r["reservation"]
assert r["id"] == "r-4", r
open(args[0], "w").write(r["token"])
' "$T_SCRATCH/token" || t_fail "reservations in a new ledger"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
python3 -c 'import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dst)
dst.close()' "$DB" "$BACKUP"
t_ok "a new state directory starts a new ledger (backed up)"

# ledger_sum: the ledger's files as they are (contents, or "none").
ledger_sum() {
  local f
  for f in "$DB" "$DB-wal"; do
    if [ -e "$f" ]; then sha256sum <"$f"; else echo none; fi
  done
}

# gd_gone PID OUT: whether gpumd PID has exited or said it is ready (on OUT).
gd_gone() {
  ! kill -0 "$1" 2>/dev/null || grep -q '^gpumd ready' "$2"
}

# refused WHAT: gpumd on the ledger as it is exits 1 before it is ready, naming the ledger, WHAT
# and the way out on stderr, leaves no socket and does not touch the ledger.
refused() {
  local what=$1 before rc=0 out="$T_SCRATCH/refused.out" err="$T_SCRATCH/refused.err" pid
  before=$(ledger_sum)
  "$GPUMD" >"$out" 2>"$err" &
  pid=$!
  T_PIDS+=("$pid")
  t_until 60 gd_gone "$pid" "$out" || t_fail "gpumd neither exited nor became ready"
  if grep -q '^gpumd ready' "$out"; then
    kill -9 "$pid"
    t_fail "gpumd started on a ledger that $what"
  fi
  wait "$pid" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$err" >&2; t_fail "gpumd exited $rc on a ledger that $what"; }
  grep -qF "ledger $DB" "$err" && grep -qF "$what" "$err" &&
    grep -qF "Restore it from a backup" "$err" && grep -qF "docs/operations.md" "$err" ||
    { cat "$err" >&2; t_fail "the message does not say that $what, naming the file and the way out"; }
  [ ! -e "$GPUM_SOCKET" ] || t_fail "a refused start left its socket"
  [ "$(ledger_sum)" = "$before" ] || t_fail "a refused start changed the ledger"
}

: >"$DB"
rm -f "$DB-wal" "$DB-shm"
refused "is empty (0 bytes)"
t_ok "a 0-byte ledger.db is refused, not taken for a new ledger"

rm -f "$DB"
python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE t(a)")
db.execute("DROP TABLE t")
db.commit()' "$DB"
refused "holds no gpumd schema"
t_ok "a database without gpumd's schema is refused"

rm -f "$DB"
cp "$BACKUP" "$DB"
python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", ("reservations",)).fetchone()[0]
page = db.execute("PRAGMA page_size").fetchone()[0]
db.close()
with open(sys.argv[1], "r+b") as f:
    f.seek((root - 1) * page)
    f.write(b"\x00")  # not a b-tree page' "$DB"
refused "fails SQLite's integrity check"
t_ok "a ledger that fails SQLite's integrity check is refused"

rm -f "$DB"
printf 'what was left of the log' >"$DB-wal"
refused "is missing but its log"
[ ! -e "$DB" ] || t_fail "a new ledger was made beside the log of a deleted one"
t_ok "a ledger.db deleted beside its log is refused"

# flip TEXT OFFSET BYTE: in the backup's bytes, the byte at OFFSET of every copy of TEXT
# becomes BYTE (hex): one flipped byte in a row, the file otherwise sound.
flip() {
  rm -f "$DB" "$DB-wal" "$DB-shm"
  python3 -c 'import sys
data = bytearray(open(sys.argv[1], "rb").read())
text, off, byte = sys.argv[3].encode(), int(sys.argv[4]), int(sys.argv[5], 16)
at = data.find(text)
assert at >= 0, "%r not in the ledger" % text
while at >= 0:
    data[at + off] = byte
    at = data.find(text, at + 1)
open(sys.argv[2], "wb").write(data)' "$BACKUP" "$DB" "$1" "$2" "$3"
}

flip notebook 4 ff
refused "reservation r-4: its label is not valid UTF-8"
flip "$(cat "$T_SCRATCH/token")" 7 ff
refused "reservation r-4: its token is not valid UTF-8"
flip "$(cat "$T_SCRATCH/token")" 7 47
refused "reservation r-4: its token is not 32 lowercase hex digits"
t_ok "a row with a flipped byte (label, token) is refused, naming the row and the field"

rm -f "$DB-wal" "$DB-shm"
cp "$BACKUP" "$DB"
gd_start
gd_py '
c = Client()
live = [r["id"] for r in c.ok("list", all=True)["reservations"]]
assert live == ["r-4"], live
r = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
assert r["id"] == "r-5", r
' || t_fail "after the restore"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
t_ok "restored from the backup: its reservations back, ids go on above them"
