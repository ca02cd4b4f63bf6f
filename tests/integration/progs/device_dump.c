/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: opens a device session and prints what the device layer reports, one
 * line per fact with key=value fields ("null" for an invalid metric), for the integration
 * tests to check with grep:
 *   session backend=nvml simulated=1 count=8 driver=550.54.15 detail="..."
 *   info 0 rc=OK name="..." uuid=... pci=... total=... cc=8.0 power_limit_mw=... ...
 *   sample 0 rc=OK memory_total=... memory_used=... ... temperature=null ...
 *   memhealth 0 rc=OK retired_pending=null remapped_corr=0 remapped_unc=1 remap_pending=1
 *     remap_failure=0          (one line; the remap fields are null together)
 *   proc 0 pid=123 memory=1073741824 user=root command="..."
 *   putil 0 rc=OK count=1 cap0=ENOSPC   (with --putil: gpum_device_process_util since 0; cap0
 *   putil 0 pid=123 sm=60 mem=30 enc=0 dec=0 ts=1764...   is the call with no room)
 *   samples ok=20 fail=0 last=OK     (with --samples N: N samples of every device)
 * On an open failure: "open rc=EDRIVER msg=..." and exit status 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/log.h>

static void usage(void) {
  fprintf(
      stderr,
      "usage: device_dump [--backend auto|nvml|host] [--nvml-library PATH] "
      "[--retries N] [--retry-base MS] [--samples N] [--no-procs] [--no-user] [--putil] [--log]\n");
  exit(2);
}

static long num(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end)
    usage();
  return v;
}

static void print_info(gpum_device_session_t *s, unsigned i) {
  gpum_device_info_t in;
  int rc = gpum_device_get_info(s, i, &in);
  printf("info %u rc=%s name=\"%s\" uuid=%s pci=%s", i, gpum_err_name(rc),
         in.valid & GPUM_INFO_NAME ? in.name : "null", in.valid & GPUM_INFO_UUID ? in.uuid : "null",
         in.valid & GPUM_INFO_PCI ? in.pci_bus_id : "null");
  if (in.valid & GPUM_INFO_MEMORY_TOTAL)
    printf(" total=%" PRIu64, in.memory_total);
  else
    printf(" total=null");
  if (in.valid & GPUM_INFO_COMPUTE_CAP)
    printf(" cc=%d.%d", in.cc_major, in.cc_minor);
  else
    printf(" cc=null");
  if (in.valid & GPUM_INFO_POWER_LIMIT)
    printf(" power_limit_mw=%u", in.power_limit_mw);
  else
    printf(" power_limit_mw=null");
  if (in.valid & GPUM_INFO_TEMP_SLOWDOWN)
    printf(" slowdown=%d", in.temp_slowdown_c);
  else
    printf(" slowdown=null");
  if (in.valid & GPUM_INFO_TEMP_SHUTDOWN)
    printf(" shutdown=%d", in.temp_shutdown_c);
  else
    printf(" shutdown=null");
  if (in.valid & GPUM_INFO_ECC_MODE)
    printf(" ecc=%d", in.ecc_enabled);
  else
    printf(" ecc=null");
  printf(" is_host=%d vendor=%s\n", in.is_host, in.vendor ? in.vendor : "null");
}

static int print_sample(gpum_device_session_t *s, unsigned i, bool print) {
  gpum_device_sample_t smp;
  int rc = gpum_device_sample(s, i, &smp);
  if (!print)
    return rc;
  printf("sample %u rc=%s", i, gpum_err_name(rc));
  for (int m = 0; m < GPUM_METRIC_COUNT; m++) {
    double v;
    if (gpum_sample_get(&smp, (gpum_metric_t)m, &v))
      printf(" %s=%.0f", gpum_metric_name((gpum_metric_t)m), v);
    else
      printf(" %s=null", gpum_metric_name((gpum_metric_t)m));
  }
  printf("\n");
  return rc;
}

static void print_memhealth(gpum_device_session_t *s, unsigned i) {
  gpum_memory_health_t mh;
  int rc = gpum_device_memory_health(s, i, &mh);
  printf("memhealth %u rc=%s", i, gpum_err_name(rc));
  if (mh.valid & GPUM_MEMHEALTH_RETIRED_PENDING)
    printf(" retired_pending=%d", mh.retired_pages_pending);
  else
    printf(" retired_pending=null");
  if (mh.valid & GPUM_MEMHEALTH_REMAPPED_ROWS)
    printf(" remapped_corr=%u remapped_unc=%u remap_pending=%d remap_failure=%d\n",
           mh.remapped_rows_correctable, mh.remapped_rows_uncorrectable, mh.remap_pending,
           mh.remap_failure);
  else
    printf(" remapped_corr=null remapped_unc=null remap_pending=null remap_failure=null\n");
}

static void print_procs(gpum_device_session_t *s, unsigned i, unsigned flags) {
  gpum_process_t procs[64];
  size_t n = 0;
  int rc = gpum_device_processes_flags(s, i, procs, 64, &n, flags);
  if (rc && rc != GPUM_ENOSPC) {
    printf("procs %u rc=%s msg=\"%s\"\n", i, gpum_err_name(rc), gpum_last_error());
    return;
  }
  for (size_t k = 0; k < n && k < 64; k++) {
    printf("proc %u pid=%u", i, procs[k].pid);
    if (procs[k].memory_valid)
      printf(" memory=%" PRIu64, procs[k].memory);
    else
      printf(" memory=null");
    printf(" user=%s command=\"%s\"\n", procs[k].user[0] ? procs[k].user : "null",
           procs[k].command);
  }
}

static void print_putil(gpum_device_session_t *s, unsigned i) {
  gpum_process_util_t u[64];
  size_t n = 0, n0 = 0;
  int rc0 = gpum_device_process_util(s, i, 0, NULL, 0, &n0);
  int rc = gpum_device_process_util(s, i, 0, u, 64, &n);
  printf("putil %u rc=%s count=%zu cap0=%s count0=%zu\n", i, gpum_err_name(rc), n,
         gpum_err_name(rc0), n0);
  for (size_t k = 0; rc == 0 && k < n; k++)
    printf("putil %u pid=%u sm=%u mem=%u enc=%u dec=%u ts=%" PRIu64 "\n", i, u[k].pid, u[k].sm_util,
           u[k].mem_util, u[k].enc_util, u[k].dec_util, u[k].timestamp_us);
}

int main(int argc, char **argv) {
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  long samples = 0;
  bool procs = true, putil = false;
  unsigned proc_flags = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      if (gpum_backend_parse(argv[++i], &o.backend))
        usage();
    } else if (!strcmp(argv[i], "--nvml-library") && i + 1 < argc) {
      o.nvml_library = argv[++i];
    } else if (!strcmp(argv[i], "--retries") && i + 1 < argc) {
      o.retries = (int)num(argv[++i]);
    } else if (!strcmp(argv[i], "--retry-base") && i + 1 < argc) {
      o.retry_base_ms = (int)num(argv[++i]);
    } else if (!strcmp(argv[i], "--samples") && i + 1 < argc) {
      samples = num(argv[++i]);
    } else if (!strcmp(argv[i], "--no-user")) {
      proc_flags |= GPUM_PROCESSES_NO_USER;
    } else if (!strcmp(argv[i], "--putil")) {
      putil = true;
    } else if (!strcmp(argv[i], "--no-procs")) {
      procs = false;
    } else if (!strcmp(argv[i], "--log")) {
      gpum_log_set_level(GPUM_LOG_DEBUG);
      gpum_log_set_target(GPUM_LOG_TARGET_STDERR);
    } else {
      usage();
    }
  }
  gpum_device_session_t *s;
  int rc = gpum_device_open(&o, &s);
  if (rc) {
    printf("open rc=%s msg=\"%s\"\n", gpum_err_name(rc), gpum_last_error());
    return 1;
  }
  unsigned n = gpum_device_count(s);
  printf("session backend=%s simulated=%d count=%u driver=%s detail=\"%s\"\n",
         gpum_backend_name(gpum_device_backend(s)), gpum_device_is_simulated(s), n,
         gpum_device_driver_version(s)[0] ? gpum_device_driver_version(s) : "null",
         gpum_device_backend_detail(s));
  if (samples > 0) {
    long ok = 0, fail = 0;
    int last = 0;
    for (long k = 0; k < samples; k++) {
      for (unsigned i = 0; i < n; i++) {
        last = print_sample(s, i, false);
        if (last)
          fail++;
        else
          ok++;
      }
    }
    printf("samples ok=%ld fail=%ld last=%s\n", ok, fail, gpum_err_name(last));
  } else {
    for (unsigned i = 0; i < n; i++) {
      print_info(s, i);
      print_sample(s, i, true);
      print_memhealth(s, i);
      if (procs)
        print_procs(s, i, proc_flags);
      if (putil)
        print_putil(s, i);
    }
  }
  gpum_device_close(s);
  return 0;
}
