/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's engine: the one owner of reservations and the one writer of their ledger rows
 * (engine.c), their leases (leases.c), the reads made before a grant (admission.c), those that
 * ended lately (ended.c), the figures their processes report (reports.c), the devices as the
 * scheduler sees them (engine_devices.c) and the reply that carries one (resv_reply.c).
 */
#ifndef GPUMD_ENGINE_H
#define GPUMD_ENGINE_H

#include "gpumd.h"
#include "json_out.h"

/* gpumd_reply_ok with the body {"reservation": f->r} (with its token when f->with_token),
 * written without building it: copied from the document slot when f->doc_serial says it holds
 * the document of f->r's latest transition in this request. */
void gpumd_reply_ok_resv(gpumd_conn_t *c, json_t *id, const gpumd_resv_reply_t *f);
/* The document slot (d->resv_doc; resv_reply.c). Every transition and every row write calls
 * gpumd_resv_doc_set or gpumd_resv_doc_forget first (engine.c). */
/* Takes the slot over for r's transition (its document is written when first needed); when
 * the cause's actor is the request about r, its reply may copy it. */
void gpumd_resv_doc_set(gpumd_t *d, const gpumd_cause_t *cause, const gpumd_resv_t *r);
/* Empties the slot (a row write: what it held may be stale). */
void gpumd_resv_doc_forget(gpumd_t *d);
/* Writes r's document without token to w: the slot's copy when the slot is r's (written there
 * first when not yet), else written from r. */
void gpumd_resv_doc_write(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r);
/* Frees the slot's memory (at stop). */
void gpumd_resv_doc_free(gpumd_t *d);
/* Applies the ledger's disabled devices to the devices that have answered (at start, and when
 * a silent device answers). */
void gpumd_engine_apply_disabled(gpumd_t *d);
/* The vendor of dev: the device layer's word ("nvidia", "amd", "intel", "host"), else what its
 * name says (gpum_gpu_type_parse), else "unknown". Never NULL. */
const char *gpumd_engine_vendor_of(const gpumd_device_t *dev);
/* The Kubernetes-style resource name of a GPU called name (the resources.<vendor> option of
 * its vendor, else resources.default). Never NULL. */
const char *gpumd_engine_resource_of(gpumd_t *d, const char *name);
/* The memory a card of name's family is sold with, in GB: what name states, else the
 * gputype.memory option's figure for its family, else libgpum's table
 * (gpum_gpu_type_memory_gb). Returns 0, or that function's error. */
int gpumd_engine_class_gb(gpumd_t *d, const char *name, double *gb);
/* The operator's switch on dev (answered, its UUID known), for the actor a: stored in the ledger
 * (by UUID, so that it survives restarts), applied to the monitor, logged, and seen by the
 * scheduler in this turn. Returns 0 or the ledger's or monitor's error (nothing changed). */
int gpumd_engine_set_disabled(gpumd_t *d, const gpumd_actor_t *a, const gpumd_device_t *dev,
                              bool disable, const char *reason);
/* Called when c closes (connection leases end). */
void gpumd_engine_conn_closed(gpumd_conn_t *c);
/* Device news from devices.c, on the loop: a health transition, a fresh sample (every
 * monitor interval), a pressure level reached (1 high, 2 critical). */
void gpumd_engine_device_health(gpumd_t *d, unsigned index, gpum_health_t to, const char *reason);
void gpumd_engine_device_sample(gpumd_t *d, unsigned index, const gpum_device_sample_t *s);
/* The scheduler's view of device index from what gpumd knows: the monitor's sample (NULL: its
 * latest), the newest process list and memory (procs: unmanaged memory recomputed from it, else
 * kept), health, and whether it was read afresh this turn. False for an unknown device. */
bool gpumd_engine_device_view(gpumd_t *d, unsigned index, const gpum_device_sample_t *sample,
                              bool procs, gpumd_sched_device_t *out);
/* The "devices" array of the status reply. */
json_t *gpumd_engine_devices_json(gpumd_t *d);
/* The same with at most max_ids ids in each device's "reservations" (the first in id order;
 * "jobs" counts them all): the socket's status, one message, builds no more than it sends. */
json_t *gpumd_engine_devices_json_head(gpumd_t *d, size_t max_ids);
#define GPUMD_ENDED_MAX 256
#define GPUMD_ENDED_KEEP_NS (600ull * 1000000000ull) /* 10 minutes */
/* Keeps a copy of r, which has just reached a final state. */
void gpumd_ended_note(gpumd_t *d, const gpumd_resv_t *r);
/* The reservations that ended within GPUMD_ENDED_KEEP_NS before now, newest first: the actor's
 * own, or everyone's with all (no tokens). */
json_t *gpumd_ended_json(gpumd_t *d, const gpumd_actor_t *a, bool all, uint64_t now_ns);
/* Before a grant or a growth is decided: every device read afresh (once per turn), its view
 * handed to the scheduler as fresh, then one scheduling pass. */
void gpumd_admission_read(gpumd_t *d);
/* The same before reservations end (a release, a disconnect) when their end may let a queued
 * request in (gpumd_sched_freed_may_grant), so that the grant is decided with the end, in
 * its actor's name: f says what ends. Not when nothing can come of it (admission.c). */
void gpumd_admission_read_for_ends(gpumd_t *d, const gpumd_sched_freed_t *f);
/* gpumd_admission_read_for_ends for reservation id alone. */
void gpumd_admission_read_for_end(gpumd_t *d, uint64_t id);
/* At the end of a turn: a read for what a pass would have granted on stale views, then every
 * view stale again. */
void gpumd_admission_end_turn(gpumd_t *d);
/* "committed X is Y over its capacity of Z" for a device whose st.overcommit > 0: the words
 * of its reason in documents and of its alert. Returns buf. */
char *gpumd_admission_overcommit_text(const gpumd_sched_device_stats_t *st, char *buf, size_t len);
/* A device that was silent answered (its info is in gpumd_device_find(d, index)): the ledger
 * learns its UUID and the scheduler its view, with its health from then on. */
void gpumd_engine_device_answered(gpumd_t *d, unsigned index);
/* Runs the scheduler's timers (queue timeouts) and re-arms its timer. */
void gpumd_engine_tick(gpumd_t *d);
/* The protocol's reservation object (token only when with_token). */
/* Adds "fenced" (what the job holds under the enforcement shim, or null) to a GRANTED
 * reservation's document o: for listings and the REST document, not for replies and events
 * (which the fast writer must produce byte for byte the same). */
void gpumd_engine_resv_add_fenced(gpumd_t *d, json_t *o, const gpumd_resv_t *r);
/* The GRANTED reservation on device that process pid, or its nearest ancestor, holds (gpum
 * run's CMD and a Slurm step's tasks count as their holder's), or NULL. Reads /proc. */
const gpumd_resv_t *gpumd_engine_resv_of_pid(gpumd_t *d, unsigned device, int32_t pid);
/* A batch of gpumd_engine_resv_of_pid lookups with no change to the reservations in between
 * (they may nest): the first builds an index of the reservations by pid, in O(reservations),
 * and each lookup is then O(1) a pid instead of a scan of them all. */
void gpumd_engine_pids_begin(gpumd_t *d);
void gpumd_engine_pids_end(gpumd_t *d);
/* Keeps figures ({"name": number}, checked: names, count) as pid's latest for source on the
 * granted reservation rid. GPUM_EINVAL (bad names or values), GPUM_EBUSY (too many sources). */
int gpumd_reports_put(gpumd_t *d, uint64_t rid, int32_t pid, const char *source, json_t *figures);
/* [{"pid", "source", "age_ms", "figures"}] of rid's live processes; NULL when none. */
json_t *gpumd_reports_json(gpumd_t *d, uint64_t rid);
/* The number of reports after dropping those of ended reservations and processes, and the
 * i-th of them (NULL past the end). */
size_t gpumd_reports_count(gpumd_t *d);
const struct gpumd_report *gpumd_report_at(gpumd_t *d, size_t i, uint64_t *rid, int32_t *pid,
                                           const char **source, json_t **figures);
void gpumd_reports_free(gpumd_t *d);
/* Remembers that c reported on rid (up to 8 reservations) and, the first time, sends it the
 * pressure of rid's devices that are under pressure now. */
void gpumd_reports_subscribe(gpumd_t *d, gpumd_conn_t *c, const gpumd_resv_t *r);
/* Whether c holds a lease on, or reported on, a live reservation on device. */
bool gpumd_engine_conn_watches_device(gpumd_t *d, gpumd_conn_t *c, unsigned device);
json_t *gpumd_engine_resv_json(gpumd_t *d, const gpumd_resv_t *r, bool with_token);
/* The same object written straight to w, byte for byte what gpumd_json_write gives for
 * gpumd_engine_resv_json (the hot replies skip building it). */
void gpumd_engine_resv_write(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r, bool with_token);
/* The same with what gpumd_engine_resv_add_fenced adds (a list's document), written. */
void gpumd_engine_resv_write_used(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r,
                                  bool with_token);
/* Adds the scheduler's fields ("committed", "reserved", "unmanaged", "jobs", "reservations":
 * the ids of at most max_ids of its granted reservations) to a device object of the status
 * reply. */
void gpumd_engine_device_json(gpumd_t *d, unsigned index, json_t *o, size_t max_ids);
/* The processes on device index, as nvitop lists them, for the REST status: [{"pid", "uid"
 * (null when not visible here), "user" (null until the users cache has the name, or when the
 * uid has none), "command", "memory", "reservation" (the id whose job it belongs to, null:
 * unmanaged)}], largest first; NULL when the device's list has not been read. Never blocks on a
 * name lookup (util/users.h). */
json_t *gpumd_engine_device_procs_json(gpumd_t *d, unsigned index);
/* A lease ended (pid exit, ttl): end the reservation with state to. */
void gpumd_engine_lease_ended(gpumd_t *d, uint64_t id, gpumd_resv_state_t to, const char *reason);
/* Opens the ledger, restores its reservations (recovery) and feeds the devices. */
int gpumd_engine_start(gpumd_t *d);
void gpumd_engine_stop(gpumd_t *d);
/* Rebuilds the scheduler options from the config (start and SIGHUP). */
int gpumd_engine_reload(gpumd_t *d);
/* End of turn, before the commit: "queued" events to clients whose queue position moved. */
void gpumd_engine_turn_events(gpumd_t *d);
/* Commits the ledger writes of this turn (and of the turns before it that waited for the
 * writer thread), if any. Returns 0 (committed, or nothing to commit: the output may go), 1
 * (handed to the writer thread: the output waits for gpumd_ledger_poll) or a negative code.
 * Not while gpumd_ledger_writing(). */
int gpumd_engine_commit(gpumd_t *d);
gpumd_lease_t *gpumd_lease_get(gpumd_t *d, uint64_t id);
/* The lease of id, created when missing (NULL: out of memory). */
gpumd_lease_t *gpumd_lease_add(gpumd_t *d, uint64_t id);
void gpumd_lease_bind(gpumd_lease_t *l, gpumd_conn_t *c); /* c NULL: unbind */
/* Watches pid (the process with start time start_time, 0 = unknown) through a pidfd: when it
 * exits, the lease ends (RELEASED; the reason names the lease process, or, while the lease
 * awaits a re-attach, the owner). Returns 0, GPUM_ENOENT (no such process, or its pid now names
 * another) or GPUM_EIO. */
int gpumd_lease_watch_pid(gpumd_t *d, gpumd_lease_t *l, int32_t pid, uint64_t start_time);
/* Stops watching the lease's pid (none watched: nothing). */
void gpumd_lease_unwatch_pid(gpumd_lease_t *l);
int gpumd_lease_arm_ttl(gpumd_t *d, gpumd_lease_t *l, uint64_t expires_ns);
void gpumd_lease_remove(gpumd_t *d, uint64_t id);
void gpumd_leases_free_all(gpumd_t *d);

/* Every reservation row and audit row reaches the ledger through engine.c: a transition the
 * scheduler reports (on_transition), the recovery at start, and the changes below, which are
 * no transition. Each stages its rows in the turn's ledger transaction (committed before any
 * reply of the turn leaves); a failed write fails the turn (ledger_failed). Loop thread only. */
/* Sets the live TTL reservation rid's expiry to expires_ns (the reserve that made it): the
 * scheduler's expires_ns, its lease's timer (the lease is made when missing) and its row.
 * Returns the reservation, or NULL when rid is not live (nothing staged). */
const gpumd_resv_t *gpumd_engine_set_ttl(gpumd_t *d, uint64_t rid, uint64_t expires_ns);
/* A renew: gpumd_engine_set_ttl with the expiry ttl_ms from now. */
const gpumd_resv_t *gpumd_engine_renew(gpumd_t *d, uint64_t rid, uint64_t ttl_ms);
/* Resizes the GRANTED reservation rid to bytes per GPU for the actor a (gpumd_sched_resize:
 * growing under admission's rules; shrinking may grant what waits, in a's name), stages its row
 * and a GRANTED -> GRANTED audit row with the old and new size and a's uid and pid, and logs it.
 * Returns 0 with *out the reservation, or gpumd_sched_resize's error (nothing changed). */
int gpumd_engine_resize(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, uint64_t bytes,
                        const gpumd_resv_t **out);

/* Stages r's row with an audit row from its state to the same, saying why, in the actor a's name
 * (NULL: gpumd): a change that is no transition (suspend.c). */
void gpumd_engine_note(gpumd_t *d, const gpumd_resv_t *r, const gpumd_actor_t *a, const char *why);

/* Suspend and resume (suspend.c; docs/suspend.md). Loop thread only. */
/* Starts the worker's plumbing and finishes the moves a stopped gpumd left under way. */
int gpumd_suspend_start(gpumd_t *d);
/* Stops the worker after the move under way (a job is never left half-moved). */
void gpumd_suspend_stop(gpumd_t *d);
/* Starts suspending the GRANTED preemptible reservation rid for a (NULL: gpumd's policy), hold:
 * until a resume asks (else when room returns), why: the SUSPENDED reason. Returns 0 (under
 * way: its "moving" says so), or GPUM_ENOENT, GPUM_ESTATE, GPUM_ENOTSUP (not preemptible,
 * managed or IPC memory, no process, no checkpoint in the driver), GPUM_EBUSY (the node's host
 * memory bound; its GPUs' processes unreadable now). */
int gpumd_suspend_begin(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, bool hold,
                        const char *why);
/* Resumes the SUSPENDED rid: placed and started now, or left to wait for room (no longer held).
 * Returns 0, GPUM_ENOENT, GPUM_ESTATE or GPUM_ENOTSUP. */
int gpumd_resume_begin(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid);
/* gpumd_suspend_begin for a job its scheduler stopped (Slurm's suspend; slurm_suspend.c): held,
 * without asking whether it is preemptible (it does not run anyway). Its stopped processes are
 * let run for the lock and the checkpoint and stopped again, whatever happens. */
int gpumd_suspend_begin_stopped(gpumd_t *d, uint64_t rid, const char *why);
/* Keeps the SUSPENDED rid (not moving) suspended until a resume asks, with the reason why (an
 * audit row). Returns 0 or GPUM_ESTATE. */
int gpumd_suspend_hold(gpumd_t *d, uint64_t rid, const char *why);
/* Something changed that the policy or a waiting resume may act on (a transition). */
void gpumd_suspend_changed(gpumd_t *d);

/* Slurm's suspend frees GPUs (slurm_suspend.c; docs/slurm.md, "Suspend"), from the suspend
 * timer, before the automatic resume: with suspend.slurm on, a GRANTED Slurm step
 * whose CUDA processes are all stopped for GPUMD_SLURM_SETTLE_NS is suspended (held), and a
 * SUSPENDED one that Slurm's suspend made is resumed when its processes run again. O(1) with
 * the option off, or with no Slurm step granted and nothing suspended. */
#define GPUMD_SLURM_SETTLE_NS (3ull * 1000000000ull)
typedef struct gpumd_slurm_watch gpumd_slurm_watch_t;
void gpumd_slurm_suspend_tick(gpumd_t *d, gpumd_slurm_watch_t **w, uint64_t now_ns);
void gpumd_slurm_suspend_free(gpumd_slurm_watch_t *w);

#endif /* GPUMD_ENGINE_H */
