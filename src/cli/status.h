/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum status` in three parts: a snapshot of the node taken through the device layer
 * (status_snapshot.c), its rendering as gpustat-like text or as JSON (status_render.c), and the
 * command with its flags and watch loop (cmd_status.c).
 *
 * A device's state is derived in one place, cli_snapshot_classify(), from what the device
 * layer returned, by the monitor's single-probe classifier (gpum_health_classify in
 * include/gpum/monitor.h): ERROR for a lost device, one needing a reset or a failed row remap,
 * BUSY at or over the busy thresholds, else AVAILABLE. The rows of CLI_DEVICE_STATES are in
 * gpum_health_t order and carry the colour each state is shown in.
 */
#ifndef GPUM_CLI_STATUS_H
#define GPUM_CLI_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <gpum/client.h>
#include <gpum/device.h>
#include <gpum/monitor.h>
#include <gpum/options.h>
#include <jansson.h>

#include "output.h"

/* X(id, name shown and in JSON, style), in gpum_health_t order (checked in status_snapshot.c),
 * then OVERCOMMITTED: a state only gpumd knows (committed memory over the device's capacity). */
#define CLI_DEVICE_STATES(X)           \
  X(AVAILABLE, "AVAILABLE", CLI_GREEN) \
  X(BUSY, "BUSY", CLI_YELLOW)          \
  X(ERROR, "ERROR", CLI_BOLD_RED)      \
  X(DISABLED, "DISABLED", CLI_DIM)     \
  X(OVERCOMMITTED, "OVERCOMMITTED", CLI_BOLD_RED)

typedef enum {
#define CLI__STATE_ENUM(id, name, style) CLI_STATE_##id,
  CLI_DEVICE_STATES(CLI__STATE_ENUM)
#undef CLI__STATE_ENUM
      CLI_STATE_COUNT
} cli_state_t;

const char *cli_state_name(cli_state_t st);
cli_style_t cli_state_style(cli_state_t st);

#define CLI_REASON_LEN 320

typedef struct {
  unsigned index;
  int info_rc, sample_rc, procs_rc; /* 0 or the GPUM_E* code of that read */
  int memhealth_rc;                 /* of gpum_device_memory_health; not read: GPUM_ENOTSUP */
  gpum_device_info_t info;
  gpum_device_sample_t sample;
  gpum_memory_health_t memhealth;
  gpum_process_t *procs; /* malloc'd; nprocs entries */
  size_t nprocs;
  /* The processes' GPU utilisation (readers started with process_util: gpum top), the newest
   * sample per pid of the last seconds; malloc'd, nputil entries. putil_rc: 0, GPUM_ENOTSUP
   * where the driver does not give it, or the error of the read; not read: GPUM_ENOTSUP. */
  gpum_process_util_t *putil;
  size_t nputil;
  int putil_rc;
  cli_state_t state;
  int error;                   /* the code behind an ERROR state (or a transient failure), else 0 */
  char reason[CLI_REASON_LEN]; /* why the state is not AVAILABLE, or a note (transient driver
                                  errors) on an AVAILABLE device; "" otherwise */
} cli_dev_snap_t;

typedef struct {
  char hostname[256];
  struct timespec time; /* CLOCK_REALTIME when the snapshot began */
  gpum_backend_kind_t backend;
  char backend_detail[512];
  char driver_version[96];
  bool simulated;
  const char *sim_node;  /* $GPUM_SIM_NODE when simulated, else NULL */
  unsigned device_count; /* devices the session found, before filtering */
  cli_dev_snap_t *devs;
  size_t ndevs;
  size_t nreadable;     /* devices not in ERROR whose sample could be read */
  struct json_t *gpumd; /* gpumd's status reply when the daemon answered, else NULL */
} cli_snapshot_t;

/* Device readers (status_readers.c): each device is read on a thread of its own with its own
 * session of the given backend, classified with busy. Returns 0 or GPUM_ENOMEM. */
typedef struct cli_readers cli_readers_t;
int cli_readers_start(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                      const gpum_busy_thresholds_t *busy, cli_readers_t **out);
/* The same, and each read also takes the per-process GPU utilisation of a device with
 * processes when process_util is set (cli_snapshot_read_process_util). */
int cli_readers_start_with(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                           const gpum_busy_thresholds_t *busy, bool process_util,
                           cli_readers_t **out);
/* Reads devs[0..n) (their index set) at once, each by its reader, waiting at most timeout_ms: a
 * device that has not answered by then (or whose reader is still in a call from an earlier
 * read) gets an ERROR row that says so (error GPUM_ETIMEDOUT). Returns 0 or GPUM_ENOMEM. */
int cli_readers_read(cli_readers_t *r, cli_dev_snap_t *devs, size_t n, unsigned timeout_ms);
/* Stops the readers; one stuck in a driver call is left to end with the process. NULL is
 * fine. */
void cli_readers_free(cli_readers_t *r);

/* Reads device d->index on session s into d and classifies it with busy (NULL: defaults).
 * Returns 0 or GPUM_ENOMEM; failures of the device are recorded in d, not returned. */
int cli_snapshot_read(gpum_device_session_t *s, cli_dev_snap_t *d,
                      const gpum_busy_thresholds_t *busy);
/* Reads the per-process GPU utilisation of d->index on s into d->putil (samples of the last
 * PUTIL_WINDOW seconds, the newest per pid), its result in d->putil_rc. Returns 0 or
 * GPUM_ENOMEM. */
int cli_snapshot_read_process_util(gpum_device_session_t *s, cli_dev_snap_t *d);
/* Frees what d owns (its process list and samples). */
void cli_dev_snap_free(cli_dev_snap_t *d);
/* Takes a snapshot: the header from session s, and the devices in sel[0..nsel) (all devices
 * when all is true) read by readers, waiting at most timeout_ms for them. Indexes must have
 * been checked against gpum_device_count. Returns 0 or GPUM_ENOMEM; per-device failures are
 * recorded in the device's state, not returned. Free with cli_snapshot_free. */
int cli_snapshot_take(gpum_device_session_t *s, cli_readers_t *readers, const unsigned *sel,
                      size_t nsel, bool all, unsigned timeout_ms, cli_snapshot_t *out);
void cli_snapshot_free(cli_snapshot_t *snap);

/* Asks gpumd at socket (with a short timeout) for its status and keeps the reply in
 * snap->gpumd (freed by cli_snapshot_free). Silent when no daemon answers: status works without
 * one. (status_gpumd.c) */
void cli_snapshot_add_gpumd(cli_snapshot_t *snap, const char *socket);

/* gpumd's reply to op (args: a JSON object's text, or NULL) as a JSON object without "id" and
 * "ok"; NULL on any failure. The caller frees it. */
json_t *cli_gpumd_ask(gpum_client_t *c, const char *op, const char *args);

/* The option status.timeout in milliseconds, within 1 ms .. 1 hour. */
unsigned cli_status_timeout_ms(const gpum_config_t *cfg);
/* Text: the reservations of device index under its line, and the queue at the end. Nothing
 * when snap->gpumd is NULL. */
/* gpumd's lines under a device seen here (its reservations, DISABLED, OVERCOMMITTED). */
void cli_render_gpumd_device(const cli_out_t *o, const cli_snapshot_t *snap,
                             const cli_dev_snap_t *dev);
/* gpumd's devices that are none of the devices seen here, each said so plainly, with its
 * lines: gpumd and this process read different drivers. */
void cli_render_gpumd_strangers(const cli_out_t *o, const cli_snapshot_t *snap);
/* gpumd's document of the device seen here as dev: the one with its UUID (by index only when
 * the UUID is not known here); NULL when gpumd has none. */
const json_t *cli_gpumd_device_of(const json_t *gpumd, const cli_dev_snap_t *dev);
/* The state to show for dev: gpumd's DISABLED or OVERCOMMITTED when it says so (only gpumd
 * knows them), else dev's own. */
cli_state_t cli_gpumd_state(const json_t *gpumd, const cli_dev_snap_t *dev);
void cli_render_gpumd_queue(const cli_out_t *o, const cli_snapshot_t *snap);

/* Derives state and reason of one device from its read results (busy NULL: defaults). */
void cli_snapshot_classify(cli_dev_snap_t *d, const gpum_busy_thresholds_t *busy);

/* The CLI state of a health state (the table's rows are in gpum_health_t order). */
cli_state_t cli_state_of_health(gpum_health_t h);

typedef struct {
  bool color;
  bool show_processes;
  int width; /* terminal width for truncating commands, 0: no truncation */
} cli_render_opts_t;

/* gpustat-like text: a header line, one line per device, its processes below. */
void cli_render_text(FILE *f, const cli_snapshot_t *snap, const cli_render_opts_t *ro);
/* The JSON document of docs/cli.md; compact (one line) or indented. Returns 0 or GPUM_ENOMEM. */
int cli_render_json(FILE *f, const cli_snapshot_t *snap, bool compact);

#endif /* GPUM_CLI_STATUS_H */
