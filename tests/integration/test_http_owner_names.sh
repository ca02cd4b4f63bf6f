#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/reservations?owner=NAME never looks the name up on gpumd's loop: the user
# database may be an LDAP server away, and a lookup blocks. With a user database that holds
# every lookup of one name until the test lets it go (preload/slow_nss.c), four such lists are
# answered by four children while the loop goes on serving (a reserve and a release on the
# socket, a list by numeric owner); a fifth list by name, with no child free, is refused with
# 503 EAGAIN instead of a lookup on the loop; let go, the four answer 400 (no such user), and a
# real name lists its owner's reservations.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

INJECT=$GPUM_TEST_PROGS/slow_nss.so
[ -f "$INJECT" ] || t_fail "no $INJECT"
RT=$(ldd "$GPUMD" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
export GPUM_HTTP_LISTEN=127.0.0.1:0
export GPUM_TEST_SLOW_NSS_NAME=gpum-slow-user GPUM_TEST_SLOW_NSS_DIR=$T_SCRATCH/nss
mkdir -p "$GPUM_TEST_SLOW_NSS_DIR"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
LD_PRELOAD="${RT:+$RT }$INJECT" gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"

hp '
import glob, pwd
me = os.getuid()
name = pwd.getpwuid(me).pw_name
held = os.environ["GPUM_TEST_SLOW_NSS_DIR"]
c = gpumd_client.Client()
rid = c.ok("reserve", bytes_per_gpu="1GiB", label="mine", lease="ttl", ttl_ms=600000)["reservation"]["id"]
ids = lambda b: [r["id"] for r in b["reservations"]]
# A name is looked up in a child even for a list this short (made on the loop otherwise).
b = expect("GET", "/api/v1/reservations?owner=" + name, 200)
assert ids(b) == [rid] and b["total"] == 1, b

# Four lists by a name the user database holds: four children (at most 4 at once) wait in it.
out = {}
def slow(k):
    out[k] = call("GET", "/api/v1/reservations?owner=gpum-slow-user", timeout=60)
threads = [threading.Thread(target=slow, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
until(lambda: len(glob.glob(held + "/entered.*")) == 4, 30, "four lookups held in children")
# The loop serves meanwhile: a reserve and a release, a list by numeric owner ...
r2 = c.ok("reserve", bytes_per_gpu="1GiB", label="meanwhile")["reservation"]["id"]
c.ok("release", reservation=r2)
assert ids(expect("GET", "/api/v1/reservations?owner=%d" % me, 200)) == [rid]
# ... and a fifth list by name, no child free, is refused rather than looked up on the loop.
expect_err("GET", "/api/v1/reservations?owner=" + name, 503, "EAGAIN", "give the uid")
# Let go: no such user.
open(held + "/go", "w").close()
for t in threads:
    t.join(60)
for k in range(4):
    st, h, doc = out[k]
    assert st == 400 and doc["error"]["code"] == "EINVAL", out[k]
    assert "gpum-slow-user" in doc["error"]["message"], out[k]
assert ids(expect("GET", "/api/v1/reservations?owner=" + name, 200)) == [rid]
' || t_fail "owner names"
t_ok "owner names are looked up in children; the loop serves meanwhile; none free: 503"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
