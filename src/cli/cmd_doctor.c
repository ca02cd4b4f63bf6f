/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum doctor`: runs the checks of doctor_checks.c and prints their findings, as text (one
 * line each, the suggestion below) or as JSON. Exit code 0 when no check failed, 1 otherwise,
 * 2 for usage errors.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "args.h"
#include "cli.h"
#include "doctor.h"
#include "output.h"

static const char *const level_names[] = {"OK", "WARN", "FAIL"};

doc_finding_t *doc_add(doc_report_t *r, const char *check, doc_level_t level, const char *fmt,
                       ...) {
  if (r->oom)
    return NULL;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    doc_finding_t *v = realloc(r->v, cap * sizeof *v);
    if (!v) {
      r->oom = true;
      return NULL;
    }
    r->v = v;
    r->cap = cap;
  }
  doc_finding_t *f = &r->v[r->n++];
  memset(f, 0, sizeof *f);
  snprintf(f->check, sizeof f->check, "%s", check);
  f->level = level;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
  return f;
}

void doc_suggest(doc_finding_t *f, const char *fmt, ...) {
  if (!f)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->suggestion, sizeof f->suggestion, fmt, ap);
  va_end(ap);
}

enum { OPT_JSON = 1, OPT_NO_COLOR };

static const cli_arg_t doctor_args[] = {
    {OPT_JSON, "--json", 0, NULL, "print the findings as JSON", 0},
    {OPT_NO_COLOR, "--no-color", 0, NULL, "no colours", 0},
    {0},
};

static const cli_cmd_spec_t doctor_spec = {
    .name = "doctor",
    .usage = "[--json] [--no-color]",
    .summary = "Check what gpum needs, each finding OK, WARN or FAIL with what to do.",
    .text = "The checks: the configuration and the other GPU managers' settings it read as\n"
            "aliases, the NVML library and driver version, the CUDA driver library,\n"
            "/dev/nvidia* permissions, CUDA_VISIBLE_DEVICES against the devices, device\n"
            "health and ECC, retired pages and remapped rows, the simulated node in use, and\n"
            "gpumd: its socket (there; owner, group and mode against you), its version\n"
            "against gpum's, and its REST API at http.listen.",
    .args = doctor_args,
    .examples = "gpum doctor\n"
                "gpum doctor --json | jq '.findings[] | select(.status != \"OK\")'",
    .exit_status = "0 when no check failed, 1 when one did, 2 for usage errors.",
};

static void print_text(const doc_report_t *r, bool color) {
  static const cli_style_t styles[] = {CLI_GREEN, CLI_YELLOW, CLI_BOLD_RED};
  cli_out_t o = {stdout, color};
  size_t count[3] = {0, 0, 0};
  for (size_t i = 0; i < r->n; i++) {
    const doc_finding_t *f = &r->v[i];
    count[f->level]++;
    cli_styled(&o, styles[f->level], "[%-4s]", level_names[f->level]);
    printf(" %-12s %s\n", f->check, f->message);
    if (f->suggestion[0])
      cli_styled(&o, CLI_DIM, "%20s-> %s\n", "", f->suggestion);
  }
  printf("\n%zu ok, %zu warning%s, %zu failure%s\n", count[0], count[1], count[1] == 1 ? "" : "s",
         count[2], count[2] == 1 ? "" : "s");
}

static int print_json(const doc_report_t *r) {
  char host[256] = "localhost";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  json_t *root = json_object(), *arr = json_array();
  size_t count[3] = {0, 0, 0};
  for (size_t i = 0; i < r->n; i++) {
    const doc_finding_t *f = &r->v[i];
    count[f->level]++;
    json_array_append_new(arr,
                          json_pack("{s:s,s:s,s:s,s:o}", "check", f->check, "status",
                                    level_names[f->level], "message", f->message, "suggestion",
                                    f->suggestion[0] ? json_string(f->suggestion) : json_null()));
  }
  json_object_set_new(root, "hostname", json_string(host));
  json_object_set_new(root, "findings", arr);
  json_object_set_new(root, "ok", json_integer((json_int_t)count[0]));
  json_object_set_new(root, "warn", json_integer((json_int_t)count[1]));
  json_object_set_new(root, "fail", json_integer((json_int_t)count[2]));
  int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(root);
  return rc;
}

int cmd_doctor(gpum_config_t *cfg, int argc, char **argv) {
  bool json = false;
  cli_args_t p;
  cli_args_init(&p, &doctor_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&doctor_spec, "unexpected argument '%s'", p.value);
    case OPT_JSON:
      json = true;
      break;
    case OPT_NO_COLOR: /* main turned it into --color=never; this is for the help */
      break;
    }
  }
  doc_report_t r = {0};
  const char *node = getenv("GPUM_SIM_NODE");
  doc_ctx_t c = {.cfg = cfg, .sim_node = node && *node ? node : NULL};
  doc_check_config(&c, &r);
  doc_check_aliases(&c, &r);
  doc_check_nvml(&c, &r);
  doc_check_cuda(&c, &r);
  doc_check_dev_files(&c, &r);
  doc_check_visible_devices(&c, &r);
  doc_check_devices(&c, &r);
  doc_check_memory_repair(&c, &r);
  doc_check_gpumd(&c, &r);
  if (c.nvml)
    gpum_device_close(c.nvml);
  int code = CLI_EXIT_OK;
  if (r.oom) {
    fprintf(stderr, "gpum doctor: out of memory\n");
    code = CLI_EXIT_FAIL;
  } else {
    if (json)
      print_json(&r);
    else
      print_text(&r, cli_use_color(cfg, stdout));
    for (size_t i = 0; i < r.n; i++)
      if (r.v[i].level == DOC_FAIL)
        code = CLI_EXIT_FAIL;
  }
  free(r.v);
  return code;
}
