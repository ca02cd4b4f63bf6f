/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd ledger: the durable record of reservations and of every state transition, in a
 * SQLite database (state_dir/ledger.db) in WAL mode.
 *
 * Group commit. The daemon's loop commits once per loop turn: it puts every reservation that
 * changed (gpumd_ledger_put()) and one audit row per transition (gpumd_ledger_audit()), commits
 * (gpumd_ledger_commit_turn()), and only then sends the replies and events of that turn.
 * put/audit stage their rows in memory; the commit writes them in one transaction (a read
 * writes them first into a transaction it opens, so that it sees them). commit_turn without
 * a write is a no-op (nothing to commit, no fsync).
 *
 * Writer thread. With gpumd_ledger_start_writer() the loop can hand a turn's writes to a
 * thread of the ledger's (gpumd_ledger_commit_async()) and go on with the next turn while
 * they are written; gpumd_ledger_poll() tells when they are committed (its fd wakes the
 * loop), and only then may the loop send that turn's replies. Writes staged while the writer
 * is busy wait for the next commit_async, so a busy writer commits several turns at once.
 * Everything else (reads, commit_turn, begin_turn, prune) first waits for the writer's
 * batch, and a turn that read the ledger is committed with commit_turn on the loop's thread.
 *
 * Pages. A new ledger has 1 KiB pages (SQLite's default is 4 KiB): a turn changes a few rows,
 * and every page it touches is a frame of the write-ahead log. Existing ledgers keep theirs.
 *
 * Durability. Default synchronous=NORMAL: in WAL mode a commit is in the WAL file when
 * COMMIT returns, so it survives a crash (even SIGKILL) of gpumd; only a power loss or kernel
 * crash may lose the last commits (the database stays consistent). That is the failure the
 * daemon promises to survive; sync_full (synchronous=FULL: fsync of the WAL on every commit)
 * also survives power loss at the price of one fsync per loop turn.
 *
 * Schema (PRAGMA user_version = GPUMD_LEDGER_SCHEMA_VERSION): reservations (one row per
 * reservation, every field of gpumd_resv_t, final ones kept as history) and audit (id,
 * reservation, from_state, to_state, time_ns, reason, uid, pid). A database with a newer
 * version is refused. Version 2 added the columns pid_start and lease_pid_start (process start
 * times); opening a version-1 database migrates it, the old rows getting 0 (= unknown).
 * Version 3 added device_uuids and want_uuids (the UUIDs of device_mask and want_mask, comma-
 * separated in index order, so that grants follow the physical devices when a restart numbers
 * them differently) and an index on ended_ns (retention); migrated rows get "" (= only the
 * indices are known, as before). Version 4 dropped the index on state and AUTOINCREMENT on
 * audit ids (cheaper writes; audit ids are max + 1). Version 5 dropped the two secondary
 * indexes left (ended_ns, audit.reservation): no table has one, so a write touches only the
 * pages of its rows. Version 6 added device_admin (uuid, reason, uid, time_ns): the devices an
 * operator disabled, one row each while disabled, by UUID so the switch follows the device
 * across restarts and renumbering. Version 7 added slurm_job and slurm_step (the Slurm job
 * and step ids a reservation was made for); migrated rows get "" (= none). Version 8 added
 * meta (key, value) with the row ('max_id', the highest reservation id ever stored), raised in
 * the transaction that stores a higher id (one write per batch with a new reservation), so
 * that ids never repeat whatever becomes of the rows; migrated ledgers get their rows' highest
 * id. Version 9 added preemptible (0/1) and suspend (a SUSPENDED reservation's hold, time, host
 * memory and checkpointed processes; "" otherwise).
 *
 * Devices. Masks in gpumd_resv_t use this run's device indices. gpumd_ledger_set_devices() tells
 * the ledger which UUID each index has: put() then stores the UUIDs next to the masks, and
 * the loads map stored UUIDs back to this run's indices.
 *
 * Retention. gpumd_ledger_prune() deletes finished reservations that ended before a time, and
 * audit rows written before it (the audit log keeps the same period, whatever became of the
 * reservation), a small batch per call, so that the daemon's turns stay short. The newest
 * reservation row and the newest audit row are always kept (and the highest reservation id is
 * in meta besides), so ids never repeat.
 *
 * Not thread-safe: one thread (the loop) uses a ledger; the writer thread is internal.
 */
#ifndef GPUMD_LEDGER_H
#define GPUMD_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPUMD_LEDGER_SCHEMA_VERSION 9
#define GPUMD_LEDGER_FILE "ledger.db"

typedef struct {
  bool sync_full; /* synchronous=FULL instead of NORMAL (see above); default false */
} gpumd_ledger_opts_t;

typedef struct gpumd_ledger gpumd_ledger_t;

/*
 * Opens state_dir/ledger.db. state_dir and missing parents are created with mode 0700. Takes
 * an exclusive flock on state_dir/ledger.lock (held until close; the kernel drops it when the
 * process dies). Only when there is no ledger.db (nor a log of one, ledger.db-wal) is a new
 * ledger made: whole, schema and all, as ledger.db.new (0600), then renamed, so that an
 * existing ledger.db always has the schema. An existing one is checked before anything is
 * written to it and refused when it is empty (0 bytes), has no gpumd schema (version 0) or a
 * newer one, or fails SQLite's PRAGMA quick_check; then set to WAL mode and the sync level,
 * migrated when older, and every row checked (ledger_check.c: a row gpumd never writes, such as
 * text that is not UTF-8, is refused, naming the row and the field; the migration is then rolled
 * back). What put() and audit() store always passes: text that is not UTF-8 is stored with '?'
 * for each bad byte. opts NULL: defaults. Returns 0; GPUM_EINVAL (state_dir NULL or
 * empty); GPUM_EBUSY (another process has the ledger open); GPUM_EPERM (directory or file not
 * accessible); GPUM_EIO (cannot create or open, or refused as above: the detail names the path,
 * what is wrong and what the operator can do); GPUM_ENOMEM.
 */
int gpumd_ledger_open(const char *state_dir, const gpumd_ledger_opts_t *opts, gpumd_ledger_t **out);
/* Rolls back an uncommitted turn and closes. NULL is fine. */
void gpumd_ledger_close(gpumd_ledger_t *l);
/* The database path ("<state_dir>/ledger.db"). */
const char *gpumd_ledger_path(const gpumd_ledger_t *l);

/* Starts the turn's transaction. Returns 0, GPUM_ESTATE (one is open) or GPUM_EIO. */
int gpumd_ledger_begin_turn(gpumd_ledger_t *l);
/* Inserts or replaces the row of r (by r->id), as part of the open turn (opened when none
 * is). The row is kept in memory and written at the commit or before the next read, so a
 * reservation put several times in one turn is written once; a write error then shows at
 * the commit (or the read). Returns 0 or GPUM_EIO. */
int gpumd_ledger_put(gpumd_ledger_t *l, const gpumd_resv_t *r);

/* One audit row. reason NULL = "". */
typedef struct {
  uint64_t id; /* filled by gpumd_ledger_audit_list; ignored by gpumd_ledger_audit */
  uint64_t reservation;
  gpumd_resv_state_t from, to;
  uint64_t time_ns;
  const char *reason;
  uint32_t uid; /* who caused it (owner, admin, or 0 for the daemon) */
  int32_t pid;
} gpumd_ledger_audit_t;
/* Appends an audit row. Returns 0 or GPUM_EIO. */
int gpumd_ledger_audit(gpumd_ledger_t *l, const gpumd_ledger_audit_t *a);

/* Commits the open turn (no-op without one) on the caller's thread, after the writer's batch.
 * Returns 0 or GPUM_EIO (the turn is rolled back: the caller must not send the turn's replies
 * as successes). A failure of the writer's batch is told by gpumd_ledger_poll, not here. */
int gpumd_ledger_commit_turn(gpumd_ledger_t *l);

/* Starts the writer thread (see above). Returns 0, GPUM_ESTATE (running), GPUM_EIO or
 * GPUM_ENOMEM. gpumd_ledger_close() stops it after the batch it has is committed. */
int gpumd_ledger_start_writer(gpumd_ledger_t *l);
/* What the writer thread calls after each batch it has committed, before the batch is told
 * done (gpumd writes the replies the batch made durable from there: server.c). Not called for
 * a batch that failed, nor for commits on the caller's thread. Set before the writer starts;
 * fn must not touch the ledger. */
typedef void (*gpumd_ledger_after_fn)(void *arg);
void gpumd_ledger_set_after_commit(gpumd_ledger_t *l, gpumd_ledger_after_fn fn, void *arg);
/* A descriptor that becomes readable when the writer finishes a batch (an eventfd: the loop
 * reads 8 bytes to clear it, then calls gpumd_ledger_poll()); -1 without a writer. */
int gpumd_ledger_writer_fd(const gpumd_ledger_t *l);
/* Commits the turn: hands the staged writes to the writer and returns 1 (the turn's replies
 * wait for gpumd_ledger_poll()); or commits at once as commit_turn does and returns 0 (no
 * writer, a read opened a transaction in this turn, or nothing to commit: the replies may
 * go now). GPUM_ESTATE while gpumd_ledger_writing(): keep staging and call again later.
 * GPUM_EIO as commit_turn. */
int gpumd_ledger_commit_async(gpumd_ledger_t *l);
/* Whether gpumd_ledger_commit_async() would hand a batch to the writer now (it runs, has
 * finished its last batch, and writes are staged outside a transaction of the caller's). */
bool gpumd_ledger_will_hand_over(gpumd_ledger_t *l);
/* Whether the writer has a batch not yet collected by gpumd_ledger_poll() (or a wait). */
bool gpumd_ledger_writing(const gpumd_ledger_t *l);
/* Waits until the writer has finished its batch (its result kept for gpumd_ledger_poll()). */
void gpumd_ledger_wait(gpumd_ledger_t *l);
/* Whether batches handed over have been committed since the last call: 1 (their turns'
 * replies may go now), 0 (none finished), or GPUM_EIO (one failed, the detail says why: it was
 * rolled back, so none of its turns may be answered). */
int gpumd_ledger_poll(gpumd_ledger_t *l);
/* Rolls back the open turn (no-op without one). */
void gpumd_ledger_rollback_turn(gpumd_ledger_t *l);
/* Commits done since open (for tests and metrics). */
uint64_t gpumd_ledger_commit_count(const gpumd_ledger_t *l);
/* Checkpoints (WAL copied back into the database) run so far by the ledger's checkpointer
 * thread, which keeps that work out of the commits: after a commit leaves 4 MiB or more in
 * the log, the thread runs a PASSIVE checkpoint with its own connection. */
uint64_t gpumd_ledger_checkpoint_count(const gpumd_ledger_t *l);
/* Times the checkpointer was told to run: when a commit first leaves 4 MiB in the log, then
 * once per further MiB (for tests). */
uint64_t gpumd_ledger_checkpoint_asks(const gpumd_ledger_t *l);

/* Every non-final reservation (QUEUED, GRANTED), in id order, in a malloc'ed array the caller
 * frees with free(); *count = 0 and *out = NULL when none. Returns 0, GPUM_EIO (unreadable or
 * invalid row: the detail names the id) or GPUM_ENOMEM. */
int gpumd_ledger_load_all(gpumd_ledger_t *l, gpumd_resv_t **out, size_t *count);
/* Loads one reservation in any state. Returns 0, GPUM_ENOENT or GPUM_EIO. */
int gpumd_ledger_get(gpumd_ledger_t *l, uint64_t id, gpumd_resv_t *out);
/* The highest reservation id ever stored (0 when none), kept apart from the rows (meta), so
 * deleted rows do not lower it: new ids start above it. */
int gpumd_ledger_max_id(gpumd_ledger_t *l, uint64_t *out);

/* ---- Devices by UUID ------------------------------------------------------------------- */

/* This run's devices: uuids[i] is the UUID of device index i (NULL or "" = no device there),
 * count <= GPUMD_SCHED_MAX_DEVICES. From then on put() stores the UUIDs of each mask (a mask
 * with a bit on an index without a UUID is stored as indices only), and the loads map stored
 * UUIDs to these indices. Returns 0 or GPUM_EINVAL (count too large, a UUID too long or with
 * a comma). */
int gpumd_ledger_set_devices(gpumd_ledger_t *l, const char *const *uuids, unsigned count);

/* A loaded reservation and what became of its devices. */
typedef struct {
  gpumd_resv_t r; /* device_mask and want_mask in this run's indices */
  /* A stored UUID that is not among this run's devices and that the reservation cannot do
   * without: one of its granted devices, or (QUEUED) one of its explicit devices when fewer
   * than gpus of them are left. "" otherwise, and for rows without UUIDs (schema version 2
   * rows, or no devices set: their stored indices are kept as they are). */
  char gone[GPUM_UUID_LEN];
} gpumd_ledger_row_t;

/* Every non-final reservation, in id order, mapped to this run's devices, in a malloc'ed
 * array the caller frees; *count = 0 and *out = NULL when none. Returns 0, GPUM_EIO or
 * GPUM_ENOMEM. (gpumd_ledger_load_all() is the same without `gone`: the bits of gone devices
 * are dropped from the masks.) */
int gpumd_ledger_load_rows(gpumd_ledger_t *l, gpumd_ledger_row_t **out, size_t *count);

/* ---- Retention --------------------------------------------------------------------------- */

/* Deletes up to max (1..10000) finished reservations (RELEASED, EXPIRED, CANCELLED, FAILED)
 * whose ended_ns is before before_ns, and up to 4 x max audit rows whose time_ns is before it,
 * in the current turn (opening one when none is open and there is something to delete).
 * Reservations are found in id order (creation order), looking at up to 20,000 rows per call
 * (the next call goes on from there; a rolled-back turn starts the scan over), audit rows
 * oldest first. The reservation and the audit row with the highest id are never
 * deleted (ids continue above them). *deleted (may be NULL) gets how many reservations were
 * deleted; *more (may be NULL) whether another call may find more to delete now (a batch or
 * the scan was full). Returns 0, GPUM_EINVAL (max) or GPUM_EIO. */
int gpumd_ledger_prune(gpumd_ledger_t *l, uint64_t before_ns, unsigned max, size_t *deleted,
                       bool *more);

/* Calls fn for every audit row of a reservation (0 = all), oldest first; fn returns false to
 * stop. The reason pointer is valid during the call. A scan of the whole table (there is no
 * index by reservation): for tools and tests, not for the loop. Returns 0 or GPUM_EIO. */
typedef bool (*gpumd_ledger_audit_fn)(void *user, const gpumd_ledger_audit_t *a);
int gpumd_ledger_audit_list(gpumd_ledger_t *l, uint64_t reservation, gpumd_ledger_audit_fn fn,
                            void *user);

/* ---- Recovery policy (pure) ------------------------------------------------------------ */

typedef enum {
  GPUMD_RECOVER_KEEP = 0,         /* restore as is */
  GPUMD_RECOVER_AWAIT_ATTACH = 1, /* restore; the daemon ends it (to `to`) unless a client
                                    attaches with the token within the grace period */
  GPUMD_RECOVER_END = 2,          /* do not restore: move it to `to` now */
} gpumd_recover_action_t;

typedef struct {
  gpumd_recover_action_t action;
  gpumd_resv_state_t to; /* AWAIT_ATTACH / END: the final state (RELEASED, CANCELLED,
                           EXPIRED) */
  char reason[GPUMD_RESV_REASON_LEN];
} gpumd_recover_decision_t;

/* Whether pid is still the process that had start time start_time (clock ticks since boot,
 * 0 = unknown: then only whether pid exists). The daemon's version is gpumd_pid_is_alive(). */
typedef bool (*gpumd_pid_alive_fn)(void *user, int32_t pid, uint64_t start_time);

/*
 * Decides what to do with one loaded non-final reservation after a restart:
 * "Alive" is asked with the recorded start time, so a reused pid counts as dead.
 *   - lease pid: KEEP while lease_pid is alive, else END (RELEASED, or CANCELLED if QUEUED);
 *   - lease ttl: KEEP while expires_ns > now_ns, else END (EXPIRED);
 *   - lease connection: the connection died with the old daemon; AWAIT_ATTACH while the
 *     owner pid is alive (its client may re-attach), else END (RELEASED / CANCELLED).
 * A final reservation gets END with its own state. Pure and thread-safe.
 */
void gpumd_ledger_recover_decide(const gpumd_resv_t *r, uint64_t now_ns, gpumd_pid_alive_fn alive,
                                 void *user, gpumd_recover_decision_t *out);
/* The same for a loaded row: a row whose device is gone (row->gone set) gets END with FAILED
 * and the reason "device GPU-... gone after restart"; otherwise gpumd_ledger_recover_decide. */
void gpumd_ledger_recover_decide_row(const gpumd_ledger_row_t *row, uint64_t now_ns,
                                     gpumd_pid_alive_fn alive, void *user,
                                     gpumd_recover_decision_t *out);

/* ---- Operator switches per device (ledger_admin.c) ---- */

typedef struct {
  char uuid[GPUM_UUID_LEN];
  char reason[GPUMD_RESV_REASON_LEN];
  uint32_t uid;     /* who disabled it */
  uint64_t time_ns; /* when (CLOCK_REALTIME) */
} gpumd_ledger_disabled_t;

/* Records that the device uuid is disabled (with reason, by uid at time_ns; a row already there
 * is replaced) or enabled again (its row deleted), in this turn's transaction: durable with the
 * turn's commit, rolled back with it. Returns 0, GPUM_EINVAL (uuid empty or too long) or
 * GPUM_EIO. */
int gpumd_ledger_set_disabled(gpumd_ledger_t *l, const char *uuid, bool disabled,
                              const char *reason, uint32_t uid, uint64_t time_ns);
/* The disabled devices, in a malloc'd array (*out, *count; NULL and 0 when none) the caller
 * frees. Returns 0, GPUM_ENOMEM or GPUM_EIO. */
int gpumd_ledger_load_disabled(gpumd_ledger_t *l, gpumd_ledger_disabled_t **out, size_t *count);

#ifdef __cplusplus
}
#endif
#endif /* GPUMD_LEDGER_H */
