/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum doctor`: a list of findings, each OK, WARN or FAIL with a message and, unless OK, a
 * suggestion. The checks live in doctor_checks.c and only add findings; cmd_doctor.c runs them
 * and prints the report as text or JSON.
 */
#ifndef GPUM_CLI_DOCTOR_H
#define GPUM_CLI_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>

#include <gpum/device.h>
#include <gpum/options.h>

typedef enum { DOC_OK = 0, DOC_WARN = 1, DOC_FAIL = 2 } doc_level_t;

typedef struct {
  char check[24];
  doc_level_t level;
  char message[640];
  char suggestion[640];
} doc_finding_t;

typedef struct {
  doc_finding_t *v;
  size_t n, cap;
  bool oom;
} doc_report_t;

/* Appends a finding (message in printf format). Returns it, or NULL when out of memory (then
 * report->oom is set and later additions are dropped). */
doc_finding_t *doc_add(doc_report_t *r, const char *check, doc_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets the suggestion of f (no-op when f is NULL). */
void doc_suggest(doc_finding_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the checks learn and share. */
typedef struct {
  const gpum_config_t *cfg;
  gpum_device_session_t *nvml; /* session on the nvml backend, or NULL when it failed */
  int nvml_rc;                 /* why it failed */
  char nvml_reason[640];
  const char *sim_node; /* $GPUM_SIM_NODE or NULL */
} doc_ctx_t;

void doc_check_config(doc_ctx_t *c, doc_report_t *r);
void doc_check_aliases(doc_ctx_t *c, doc_report_t *r); /* other GPU managers' settings read */
void doc_check_nvml(doc_ctx_t *c, doc_report_t *r);    /* opens c->nvml */
void doc_check_cuda(doc_ctx_t *c, doc_report_t *r);
void doc_check_dev_files(doc_ctx_t *c, doc_report_t *r);
void doc_check_visible_devices(doc_ctx_t *c, doc_report_t *r);
void doc_check_devices(doc_ctx_t *c, doc_report_t *r); /* health and ECC per device */
/* Retired pages and remapped rows per device: a failed remap fails, a pending one warns. */
void doc_check_memory_repair(doc_ctx_t *c, doc_report_t *r);
/* gpumd itself (doctor_gpumd.c): its socket (there, owner/group/mode against the caller),
 * whether it answers and with which version, and its REST API where http.listen says. */
void doc_check_gpumd(doc_ctx_t *c, doc_report_t *r);

#endif /* GPUM_CLI_DOCTOR_H */
