/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Suspending another CUDA process by pid (gpum/checkpoint.h): the driver's process-checkpoint
 * calls, their arguments built and checked here, and every failure told with the pid, the step,
 * the driver's error, what to do, and the state the process is in afterwards (read again, since
 * the driver's error alone does not say whether anything changed).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/checkpoint.h>
#include <gpum/error.h>

#include "device/checkpoint_internal.h"
#include "device/cuda_loader.h"

/* cuda_abi.h names the codes the checkpoint calls return but this one. */
#define CU_ERR_ILLEGAL_STATE ((CUresult)401)

/* The first CUDA whose driver API has the checkpoint calls (cuda.h, group CUDA_CHECKPOINT). */
#define CKPT_MIN_CUDA "CUDA 12.8 (driver 570 or later)"

struct gpum_ckpt {
  gpum__cuda_t *cu;
};

/* The steps, for messages. */
typedef enum { STEP_STATE, STEP_LOCK, STEP_CHECKPOINT, STEP_RESTORE, STEP_UNLOCK, STEP_TID } step_t;

static const char *const step_names[] = {
    "read the checkpoint state of", "lock", "checkpoint", "restore", "unlock",
    "find the restore thread of"};
/* The state each step starts from, for ILLEGAL_STATE's message. */
static const char *const step_needs[] = {"", "running", "locked", "checkpointed", "locked", ""};

const char *gpum_ckpt_state_name(int state) {
  switch (state) {
  case GPUM_CKPT_RUNNING:
    return "running";
  case GPUM_CKPT_LOCKED:
    return "locked";
  case GPUM_CKPT_CHECKPOINTED:
    return "checkpointed";
  case GPUM_CKPT_FAILED:
    return "failed";
  default:
    return "unknown";
  }
}

int gpum__ckpt_wrap(gpum__cuda_t *cu, gpum_ckpt **out) {
  if (!cu->cuCheckpointProcessLock || !cu->cuCheckpointProcessCheckpoint ||
      !cu->cuCheckpointProcessRestore || !cu->cuCheckpointProcessUnlock ||
      !cu->cuCheckpointProcessGetState || !cu->cuCheckpointProcessGetRestoreThreadId) {
    int v = cu->driver_version;
    int rc = gpum_error(GPUM_EDRIVERVER,
                        "the CUDA driver %s (CUDA %d.%d) has no process checkpoint API "
                        "(cuCheckpointProcessLock and the rest): suspending a process needs %s",
                        cu->path, v / 1000, v % 1000 / 10, CKPT_MIN_CUDA);
    gpum__cuda_unload(cu);
    return rc;
  }
  gpum_ckpt *c = calloc(1, sizeof *c);
  if (!c) {
    gpum__cuda_unload(cu);
    return gpum_error(GPUM_ENOMEM, "cannot allocate a checkpoint handle");
  }
  c->cu = cu;
  *out = c;
  return 0;
}

int gpum_ckpt_open(const char *library, gpum_ckpt **out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_ckpt_open: out is NULL");
  *out = NULL;
  gpum__cuda_t *cu;
  int rc = gpum__cuda_load(library, &cu);
  if (rc)
    return rc;
  return gpum__ckpt_wrap(cu, out);
}

void gpum_ckpt_close(gpum_ckpt *c) {
  if (!c)
    return;
  gpum__cuda_unload(c->cu);
  free(c);
}

/* " (it is now locked)", or why the state could not be read. */
static void state_now(const gpum_ckpt *c, int pid, char *out, size_t len) {
  CUprocessState s = -1;
  CUresult r = c->cu->cuCheckpointProcessGetState(pid, &s);
  if (r == CUDA_SUCCESS)
    snprintf(out, len, "it is now %s", gpum_ckpt_state_name(s));
  else
    snprintf(out, len, "its state cannot be read: %s", gpum__cuda_error_name(c->cu, r));
}

/* What the caller should know and do, per step and result. */
static int advice(step_t step, CUresult r, int pid, unsigned timeout_ms, const char **why) {
  switch ((int)r) {
  case CU_ERR_ILLEGAL_STATE:
    *why = "the step is not allowed from the process's state";
    return GPUM_ESTATE;
  case CUDA_ERROR_NOT_READY:
    if (step == STEP_LOCK) {
      *why = timeout_ms ? "a CUDA call of the process did not finish within the bound; nothing "
                          "changed: retry with a longer bound or when its work is done"
                        : "a CUDA call of the process did not finish";
      return GPUM_ETIMEDOUT;
    }
    break;
  case CUDA_ERROR_OUT_OF_MEMORY:
    if (step == STEP_RESTORE) {
      *why = "no room on a GPU to restore onto; nothing was restored: free or reserve the "
             "memory, then retry";
      return GPUM_EDEVOOM;
    }
    if (step == STEP_CHECKPOINT) {
      *why = "host memory could not take the process's device memory: free host memory, or "
             "unlock it";
      return GPUM_ENOMEM;
    }
    break;
  case CUDA_ERROR_NOT_INITIALIZED:
    /* The handle's own driver is initialised (gpum_ckpt_open called cuInit): this is the
     * target's. The real driver answers so for a live process that never initialised CUDA
     * (seen on driver 580, docs/hardware.md). */
    *why = "no CUDA process with that pid (it never initialised CUDA, or it exited)";
    return GPUM_EINVAL;
  case CUDA_ERROR_INVALID_VALUE:
    *why = step == STEP_RESTORE
               ? "no CUDA process with that pid, or GPU pairs the driver refused (an unknown "
                 "GPU, a GPU the process has memory on left out, or a GPU of another kind)"
               : "no CUDA process with that pid (it never called cuInit, or it exited)";
    return GPUM_EINVAL;
  case CUDA_ERROR_UNKNOWN:
    *why = "the driver failed inside the process; if it is now failed, only ending it frees it";
    return GPUM_EIO;
  case CUDA_ERROR_NOT_SUPPORTED:
    *why = "the driver does not support checkpointing this process or GPU";
    return GPUM_ENOTSUP;
  default:
    break;
  }
  (void)pid;
  *why = "the driver refused";
  return gpum__cuda_map_error(r);
}

/* 0 when r is CUDA_SUCCESS; else the mapped code with the whole story in the detail. */
static int check(const gpum_ckpt *c, CUresult r, step_t step, int pid, unsigned timeout_ms) {
  if (r == CUDA_SUCCESS)
    return 0;
  const char *why;
  int rc = advice(step, r, pid, timeout_ms, &why);
  char now[96];
  state_now(c, pid, now, sizeof now);
  if (r == CU_ERR_ILLEGAL_STATE)
    return gpum_error(rc, "cannot %s pid %d: %s; %s needs it %s (%s)", step_names[step], pid, now,
                      step_names[step], step_needs[step], gpum__cuda_error_name(c->cu, r));
  if (step == STEP_LOCK && timeout_ms && r == CUDA_ERROR_NOT_READY)
    return gpum_error(rc, "cannot lock pid %d within %u ms: %s (%s); %s", pid, timeout_ms,
                      gpum__cuda_error_name(c->cu, r), why, now);
  return gpum_error(rc, "cannot %s pid %d: %s (%s); %s", step_names[step], pid,
                    gpum__cuda_error_name(c->cu, r), why, now);
}

static int check_args(const gpum_ckpt *c, int pid, const char *fn) {
  if (!c)
    return gpum_error(GPUM_EINVAL, "%s: the handle is NULL", fn);
  if (pid <= 0)
    return gpum_error(GPUM_EINVAL, "%s: pid %d is no process", fn, pid);
  return 0;
}

int gpum_ckpt_state(gpum_ckpt *c, int pid, gpum_ckpt_state_t *state) {
  int rc = check_args(c, pid, "gpum_ckpt_state");
  if (rc)
    return rc;
  if (!state)
    return gpum_error(GPUM_EINVAL, "gpum_ckpt_state: state is NULL");
  CUprocessState s = -1;
  CUresult r = c->cu->cuCheckpointProcessGetState(pid, &s);
  if (r != CUDA_SUCCESS) {
    const char *why;
    rc = advice(STEP_STATE, r, pid, 0, &why);
    return gpum_error(rc, "cannot read the checkpoint state of pid %d: %s (%s)", pid,
                      gpum__cuda_error_name(c->cu, r), why);
  }
  if (s < GPUM_CKPT_RUNNING || s > GPUM_CKPT_FAILED)
    return gpum_error(GPUM_ENOTSUP, "pid %d is in checkpoint state %d, which gpum does not know",
                      pid, (int)s);
  *state = (gpum_ckpt_state_t)s;
  return 0;
}

int gpum_ckpt_lock(gpum_ckpt *c, int pid, unsigned timeout_ms) {
  int rc = check_args(c, pid, "gpum_ckpt_lock");
  if (rc)
    return rc;
  CUcheckpointLockArgs a = {.timeoutMs = timeout_ms};
  return check(c, c->cu->cuCheckpointProcessLock(pid, &a), STEP_LOCK, pid, timeout_ms);
}

int gpum_ckpt_checkpoint(gpum_ckpt *c, int pid) {
  int rc = check_args(c, pid, "gpum_ckpt_checkpoint");
  if (rc)
    return rc;
  CUcheckpointCheckpointArgs a = {0};
  return check(c, c->cu->cuCheckpointProcessCheckpoint(pid, &a), STEP_CHECKPOINT, pid, 0);
}

int gpum_ckpt_unlock(gpum_ckpt *c, int pid) {
  int rc = check_args(c, pid, "gpum_ckpt_unlock");
  if (rc)
    return rc;
  CUcheckpointUnlockArgs a = {0};
  return check(c, c->cu->cuCheckpointProcessUnlock(pid, &a), STEP_UNLOCK, pid, 0);
}

int gpum_ckpt_restore_thread(gpum_ckpt *c, int pid, int *tid) {
  int rc = check_args(c, pid, "gpum_ckpt_restore_thread");
  if (rc)
    return rc;
  if (!tid)
    return gpum_error(GPUM_EINVAL, "gpum_ckpt_restore_thread: tid is NULL");
  return check(c, c->cu->cuCheckpointProcessGetRestoreThreadId(pid, tid), STEP_TID, pid, 0);
}

static int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  ch = (char)tolower((unsigned char)ch);
  return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int gpum__ckpt_parse_uuid(const char *s, uint8_t out[16]) {
  if (!s)
    return gpum_error(GPUM_EINVAL, "a GPU UUID is NULL");
  /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx: 4 + 36 characters. */
  if (strncasecmp(s, "GPU-", 4) != 0)
    return gpum_error(GPUM_EINVAL,
                      "'%s' is no GPU UUID: it must start with GPU- (a MIG instance cannot be "
                      "restored onto)",
                      s);
  const char *p = s + 4;
  size_t n = strlen(p);
  if (n != 36)
    return gpum_error(GPUM_EINVAL,
                      "'%s' is no GPU UUID: 36 characters must follow GPU- (8-4-4-4-12 hex "
                      "digits), not %zu",
                      s, n);
  unsigned byte = 0;
  for (size_t i = 0; i < 36;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (p[i] != '-')
        return gpum_error(GPUM_EINVAL, "'%s' is no GPU UUID: '-' expected at offset %zu", s, i + 4);
      i++;
      continue;
    }
    int hi = hex_digit(p[i]), lo = hex_digit(p[i + 1]);
    if (hi < 0 || lo < 0)
      return gpum_error(GPUM_EINVAL, "'%s' is no GPU UUID: a hex digit expected at offset %zu", s,
                        (hi < 0 ? i : i + 1) + 4);
    out[byte++] = (uint8_t)(hi << 4 | lo);
    i += 2;
  }
  return 0;
}

int gpum_ckpt_restore(gpum_ckpt *c, int pid, const char *const *old_uuids,
                      const char *const *new_uuids, size_t count) {
  int rc = check_args(c, pid, "gpum_ckpt_restore");
  if (rc)
    return rc;
  if (count > GPUM_CKPT_MAX_PAIRS)
    return gpum_error(GPUM_EINVAL, "gpum_ckpt_restore: %zu GPU pairs, at most %d", count,
                      GPUM_CKPT_MAX_PAIRS);
  if (count && (!old_uuids || !new_uuids))
    return gpum_error(GPUM_EINVAL, "gpum_ckpt_restore: %zu GPU pairs but no UUID arrays", count);
  CUcheckpointGpuPair pairs[GPUM_CKPT_MAX_PAIRS];
  for (size_t i = 0; i < count; i++) {
    rc = gpum__ckpt_parse_uuid(old_uuids[i], (uint8_t *)pairs[i].oldUuid.bytes);
    if (!rc)
      rc = gpum__ckpt_parse_uuid(new_uuids[i], (uint8_t *)pairs[i].newUuid.bytes);
    if (rc) {
      char why[512]; /* the parser's detail, copied: gpum_error writes the same buffer */
      snprintf(why, sizeof why, "%s", gpum_last_error());
      return gpum_error(rc, "cannot restore pid %d: GPU pair %zu: %s", pid, i, why);
    }
  }
  CUcheckpointRestoreArgs a = {.gpuPairs = count ? pairs : NULL, .gpuPairsCount = (unsigned)count};
  return check(c, c->cu->cuCheckpointProcessRestore(pid, &a), STEP_RESTORE, pid, 0);
}
