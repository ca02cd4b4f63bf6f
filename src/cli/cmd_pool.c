/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum pool ...`: tools around the pool allocator (docs/pool.md). `gpum pool replay` replays an
 * RMM CSV allocation log against one strategy or all of them and reports peaks, fragmentation,
 * OOMs and the time per operation, optionally bisecting the smallest capacity that fits;
 * `gpum pool gen-trace transformer` writes a synthetic training log to replay.
 *
 * Nothing is printed to stdout until every replay has succeeded, so a failure never leaves a
 * partial report behind. Exit codes: 0 success (OOMs during a replay are results, not failures),
 * 1 failure (unreadable or malformed log, a source that cannot be opened), 2 usage error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include <gpum/error.h>
#include <gpum/pool.h>
#include <gpum/pool_replay.h>
#include <gpum/size.h>

#include "args.h"
#include "cli.h"

#define NSTRATEGIES 4

/* ---- flags ---- */

static int bad_value(const char *sub, const char *flag, const char *val, const char *expect) {
  fprintf(stderr, "gpum pool %s: bad value '%s' for %s (expected %s)\n", sub, val, flag, expect);
  return CLI_EXIT_USAGE;
}

/* ---- replay: output ---- */

typedef struct {
  gpum_replay_result_t r;
  bool has_min;
  gpum_replay_min_capacity_t min;
} run_t;

static char *sz(uint64_t v, char *buf) {
  return gpum_size_format(v, buf, GPUM_SIZE_BUFSZ);
}

static json_t *log_json(const char *path, const gpum_replay_log_info_t *in) {
  return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "path",
                   path, "rows", (json_int_t)in->rows, "allocations", (json_int_t)in->allocs,
                   "frees", (json_int_t)in->frees, "allocation_failures",
                   (json_int_t)in->alloc_failures, "unknown_frees", (json_int_t)in->unknown_frees,
                   "zero_size_allocations", (json_int_t)in->zero_size, "reused_pointers",
                   (json_int_t)in->reused_pointers, "threads", (json_int_t)in->threads, "streams",
                   (json_int_t)in->streams, "peak_live_bytes", (json_int_t)in->peak_live_bytes,
                   "peak_live_blocks", (json_int_t)in->peak_live_blocks, "live_at_end",
                   (json_int_t)in->live_at_end);
}

static json_t *run_json(const char *path, const char *source, const gpum_replay_log_info_t *in,
                        const run_t *run) {
  const gpum_replay_result_t *r = &run->r;
  json_t *o = json_object();
  json_object_set_new(o, "strategy", json_string(gpum_pool_strategy_name(r->strategy)));
  json_object_set_new(o, "source", json_string(source));
  json_object_set_new(o, "capacity",
                      r->capacity ? json_integer((json_int_t)r->capacity) : json_null());
  json_object_set_new(o, "log", log_json(path, in));
  json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)r->peak_live));
  json_object_set_new(o, "peak_allocated_bytes", json_integer((json_int_t)r->peak_allocated));
  json_object_set_new(o, "peak_reserved_bytes", json_integer((json_int_t)r->peak_reserved));
  json_object_set_new(o, "peak_requested_bytes", json_integer((json_int_t)r->peak_requested));
  json_object_set_new(o, "reserved_over_allocated", json_real(r->reserved_ratio));
  json_object_set_new(o, "reserved_over_live", json_real(r->reserved_to_live));
  json_object_set_new(o, "fragmentation_at_peak",
                      r->fragmentation_at_peak >= 0 ? json_real(r->fragmentation_at_peak)
                                                    : json_null());
  json_object_set_new(o, "ooms", json_integer((json_int_t)r->ooms));
  json_object_set_new(o, "first_oom_line",
                      r->first_oom_line ? json_integer((json_int_t)r->first_oom_line)
                                        : json_null());
  json_object_set_new(o, "stopped_at_oom", json_boolean(r->stopped));
  json_object_set_new(o, "skipped_frees_of_failed", json_integer((json_int_t)r->failed_frees));
  json_object_set_new(o, "alloc_retries", json_integer((json_int_t)r->retries));
  json_object_set_new(o, "segments_peak", json_integer((json_int_t)r->segments_peak));
  json_object_set_new(o, "source_allocs", json_integer((json_int_t)r->source_allocs));
  json_object_set_new(o, "ops", json_integer((json_int_t)r->ops));
  json_object_set_new(o, "elapsed_ns", json_integer((json_int_t)r->elapsed_ns));
  json_object_set_new(o, "ns_per_op", json_real(r->ns_per_op));
  if (run->has_min)
    json_object_set_new(o, "min_capacity",
                        json_pack("{s:I, s:f, s:I, s:I, s:i}", "bytes",
                                  (json_int_t)run->min.min_capacity, "over_live",
                                  run->min.ratio_to_live, "failed_below",
                                  (json_int_t)run->min.failed_below, "resolution",
                                  (json_int_t)run->min.resolution, "runs", (int)run->min.runs));
  return o;
}

static void print_text(const char *path, const char *source, const gpum_replay_log_info_t *in,
                       const run_t *run) {
  const gpum_replay_result_t *r = &run->r;
  char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ];
  printf("log             %s: %llu rows, %llu allocations, %llu frees, %llu thread%s\n", path,
         (unsigned long long)in->rows, (unsigned long long)in->allocs,
         (unsigned long long)in->frees, (unsigned long long)in->threads,
         in->threads == 1 ? "" : "s");
  printf("                %llu allocation failures and %llu unknown frees skipped, %llu live "
         "at the end\n",
         (unsigned long long)in->alloc_failures, (unsigned long long)in->unknown_frees,
         (unsigned long long)in->live_at_end);
  printf("peak live       %s (exact sizes, the least any allocator needs)\n",
         sz(in->peak_live_bytes, a));
  printf("strategy        %s on %s, capacity %s\n", gpum_pool_strategy_name(r->strategy), source,
         r->capacity ? sz(r->capacity, b) : "unlimited");
  printf("peak allocated  %s\n", sz(r->peak_allocated, a));
  printf("peak reserved   %s (%.3fx peak allocated, %.3fx peak live)\n", sz(r->peak_reserved, a),
         r->reserved_ratio, r->reserved_to_live);
  if (r->fragmentation_at_peak >= 0)
    printf("fragmentation   %.1f%% at peak reserved\n", 100 * r->fragmentation_at_peak);
  printf("OOMs            %llu", (unsigned long long)r->ooms);
  if (r->ooms)
    printf(" (first at line %llu%s; %llu frees of failed allocations skipped)",
           (unsigned long long)r->first_oom_line, r->stopped ? ", replay stopped there" : "",
           (unsigned long long)r->failed_frees);
  printf("\nretries         %llu\n", (unsigned long long)r->retries);
  printf("time            %.1f ns per operation (%llu operations)\n", r->ns_per_op,
         (unsigned long long)r->ops);
  if (run->has_min)
    printf("min capacity    %s = %.4fx peak live (bisection: %u replays, resolution %s)\n",
           sz(run->min.min_capacity, a), run->min.ratio_to_live, run->min.runs,
           sz(run->min.resolution, b));
}

static void print_table(const gpum_replay_log_info_t *in, const char *path, const char *source,
                        const run_t *runs, int n, bool with_min) {
  char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ], c[GPUM_SIZE_BUFSZ];
  printf("%s: %llu rows, peak live %s; source %s, capacity %s\n", path,
         (unsigned long long)in->rows, sz(in->peak_live_bytes, a), source,
         runs[0].r.capacity ? sz(runs[0].r.capacity, b) : "unlimited");
  printf("%-20s %12s %12s %9s %8s %6s %7s %8s", "STRATEGY", "PEAK ALLOC", "PEAK RESERV",
         "RES/ALLOC", "FRAG", "OOMS", "RETRIES", "NS/OP");
  if (with_min)
    printf(" %12s %8s", "MIN CAPACITY", "MIN/LIVE");
  putchar('\n');
  for (int i = 0; i < n; i++) {
    const gpum_replay_result_t *r = &runs[i].r;
    char frag[16] = "n/a";
    if (r->fragmentation_at_peak >= 0)
      snprintf(frag, sizeof frag, "%.1f%%", 100 * r->fragmentation_at_peak);
    printf("%-20s %12s %12s %9.3f %8s %6llu %7llu %8.1f", gpum_pool_strategy_name(r->strategy),
           sz(r->peak_allocated, a), sz(r->peak_reserved, b), r->reserved_ratio, frag,
           (unsigned long long)r->ooms, (unsigned long long)r->retries, r->ns_per_op);
    if (with_min)
      printf(" %12s %8.4f", sz(runs[i].min.min_capacity, c), runs[i].min.ratio_to_live);
    putchar('\n');
  }
}

/* ---- replay ---- */

enum {
  O_STRATEGY = 1,
  O_SOURCE,
  O_CAPACITY,
  O_DEVICE,
  O_CACHE_LIMIT,
  O_EXPANDABLE,
  O_STOP_ON_OOM,
  O_FIND_MIN,
  O_JSON,
  O_LAYERS,
  O_HIDDEN,
  O_HEADS,
  O_SEQ,
  O_BATCH,
  O_VOCAB,
  O_STEPS,
  O_SEED,
  O_DTYPE,
  O_FLASH,
  O_OUTPUT,
  O_COUNT_ /* the size of the values array */
};

static const cli_arg_t replay_args[] = {
    {O_STRATEGY, "--strategy", 0, "S",
     "BALANCED (default), GREEDY, CONSOLIDATED, FRAGMENTATION_AWARE, or 'all' for one row (JSON: "
     "one array element) per strategy",
     0},
    {O_SOURCE, "--source", 0, "NAME",
     "simulated (default: addresses only, no memory), host, pinned, cuda, cuda-vmm", 0},
    {O_CAPACITY, "--capacity", 0, "SIZE",
     "simulated: the address space's size; other sources: the pool's limit (e.g. 16GiB; default "
     "unlimited)",
     0},
    {O_DEVICE, "--device", 0, "N", "GPU for the cuda sources (default 0)", 0},
    {O_CACHE_LIMIT, "--cache-limit", 0, "B",
     "the most the pool keeps cached (reserved, not allocated): a size (2GiB), a fraction such "
     "as 0.25 or 1.0 of the limit (else of the device), or 'none' (default: none under a limit, "
     "else 1/8 of the device; docs/pool.md, 'The cache bound')",
     0},
    {O_EXPANDABLE, "--expandable-segments", 0, NULL,
     "segments that grow in place (the source's virtual memory: cuda-vmm), as PyTorch's "
     "expandable_segments:True",
     0},
    {O_STOP_ON_OOM, "--stop-on-oom", 0, NULL,
     "stop at the first failed allocation (default: count it, go on, and skip the frees of "
     "failed allocations)",
     0},
    {O_FIND_MIN, "--find-min-capacity", 0, NULL,
     "also bisect the smallest simulated capacity with no OOM, to 1 MiB or 0.1% of peak live "
     "bytes (whichever is finer)",
     0},
    {O_JSON, "--json", 0, NULL, "JSON instead of text", 0},
    {0},
};

static const cli_cmd_spec_t replay_spec = {
    .name = "pool replay",
    .usage = "LOG.csv|- [--strategy S|all] [--source NAME] [--capacity SIZE]\n"
             " [--device N] [--cache-limit B] [--stop-on-oom] [--expandable-segments]\n"
             " [--find-min-capacity] [--json]",
    .summary = "Replay an RMM CSV allocation log against the pool allocator.",
    .text = "The log's columns: Thread,Time,Action,Pointer,Size,Stream ('-' reads stdin). It\n"
            "reports peak allocated and reserved bytes, their ratio, fragmentation at peak\n"
            "reserved, OOMs, retries and nanoseconds per operation. Multi-thread logs replay\n"
            "on one thread: each thread's rows in order, threads merged by Time, then by row.\n"
            "Frees of pointers that are not live are counted and skipped. See docs/pool.md,\n"
            "'Replaying a log'.",
    .args = replay_args,
    .examples = "gpum pool replay train.csv --strategy all\n"
                "gpum pool gen-trace transformer | gpum pool replay - --find-min-capacity",
    .exit_status = "0 done (OOMs are results), 1 unreadable or malformed log or source failure, "
                   "2 usage error.",
};

static const char *const source_names[] = {"simulated", "host", "pinned", "cuda", "cuda-vmm"};

static bool known_source(const char *s) {
  for (size_t i = 0; i < sizeof source_names / sizeof source_names[0]; i++)
    if (!strcmp(s, source_names[i]))
      return true;
  return false;
}

typedef struct {
  const char *path, *strategy, *source, *capacity, *device, *cache_limit;
  bool json, find_min, stop, expandable, help;
} replay_args_t;

/* --cache-limit: a size, a fraction in (0, 1], or "none" into po. Returns 0 or -1. */
static int parse_cache_limit(const char *s, gpum_pool_opts_t *po) {
  if (!strcasecmp(s, "none")) {
    po->cache_limit_bytes = UINT64_MAX;
    return 0;
  }
  uint64_t bytes;
  if (gpum_size_parse(s, &bytes) == 0 && bytes > 0) {
    po->cache_limit_bytes = bytes;
    return 0;
  }
  char *end;
  errno = 0;
  double f = strtod(s, &end);
  if (errno || end == s || *end || !(f > 0 && f <= 1))
    return -1;
  po->cache_limit_fraction = f;
  return 0;
}

/* Validates the flags into opts (with po, the pool options it points to) and the strategy
 * list. Returns 0 or CLI_EXIT_USAGE. */
static int replay_setup(const replay_args_t *a, gpum_replay_opts_t *o, gpum_pool_opts_t *po,
                        gpum_pool_strategy_t *list, int *n) {
  gpum_replay_opts_init(o);
  gpum_pool_opts_init(po);
  po->name = "replay";
  o->pool_opts = po;
  if (a->cache_limit && parse_cache_limit(a->cache_limit, po))
    return bad_value("replay", "--cache-limit", a->cache_limit,
                     "a size such as 2GiB, a fraction such as 0.25, or none");
  o->stop_on_oom = a->stop;
  po->expandable_segments = a->expandable;
  if (a->source && !known_source(a->source))
    return bad_value("replay", "--source", a->source, "simulated, host, pinned, cuda or cuda-vmm");
  if (a->source)
    o->source = a->source;
  if (a->capacity && gpum_size_parse(a->capacity, &o->capacity))
    return bad_value("replay", "--capacity", a->capacity, "a size such as 16GiB or 512MiB");
  unsigned long long dev = 0;
  if (a->device && cli_parse_uint(a->device, 0, 255, false, &dev))
    return bad_value("replay", "--device", a->device, "a device index");
  o->device = (int)dev;
  *n = 1;
  list[0] = GPUM_POOL_BALANCED;
  if (a->strategy && !strcasecmp(a->strategy, "all")) {
    static const gpum_pool_strategy_t all[NSTRATEGIES] = {GPUM_POOL_BALANCED, GPUM_POOL_GREEDY,
                                                          GPUM_POOL_CONSOLIDATED,
                                                          GPUM_POOL_FRAGMENTATION_AWARE};
    memcpy(list, all, sizeof all);
    *n = NSTRATEGIES;
  } else if (a->strategy && gpum_pool_strategy_parse(a->strategy, &list[0])) {
    return bad_value("replay", "--strategy", a->strategy,
                     "BALANCED, GREEDY, CONSOLIDATED, FRAGMENTATION_AWARE or all");
  }
  return 0;
}

static int replay_report(const replay_args_t *a, const gpum_replay_opts_t *o,
                         const gpum_replay_log_info_t *in, const run_t *runs, int n, bool all) {
  const char *source = o->source;
  if (!a->json) {
    if (all)
      print_table(in, a->path, source, runs, n, a->find_min);
    else
      print_text(a->path, source, in, &runs[0]);
    return fflush(stdout) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  }
  json_t *doc = all ? json_array() : NULL;
  for (int i = 0; i < n; i++) {
    json_t *j = run_json(a->path, source, in, &runs[i]);
    if (all)
      json_array_append_new(doc, j);
    else
      doc = j;
  }
  int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(doc);
  if (rc || putchar('\n') == EOF || fflush(stdout)) {
    fprintf(stderr, "gpum pool replay: cannot write the report\n");
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

static int pool_replay(int argc, char **argv) {
  replay_args_t a = {0};
  const char *pos[1], *v[O_COUNT_] = {0};
  int np, rc = cli_args_collect(&replay_spec, argc, argv, v, O_COUNT_, pos, 0, 1, &np);
  if (rc != 0)
    return rc == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  if (np < 1)
    return cli_args_error(&replay_spec, "missing LOG.csv");
  a.strategy = v[O_STRATEGY];
  a.source = v[O_SOURCE];
  a.capacity = v[O_CAPACITY];
  a.device = v[O_DEVICE];
  a.cache_limit = v[O_CACHE_LIMIT];
  a.json = v[O_JSON] != NULL;
  a.find_min = v[O_FIND_MIN] != NULL;
  a.stop = v[O_STOP_ON_OOM] != NULL;
  a.expandable = v[O_EXPANDABLE] != NULL;
  a.path = pos[0];
  gpum_replay_opts_t o;
  gpum_pool_opts_t po;
  gpum_pool_strategy_t list[NSTRATEGIES];
  int n;
  if ((rc = replay_setup(&a, &o, &po, list, &n)))
    return rc;
  gpum_replay_log_t *log = NULL;
  gpum_error_clear();
  rc = strcmp(a.path, "-") ? gpum_replay_log_open(a.path, &log)
                           : gpum_replay_log_read(stdin, "stdin", &log);
  if (rc) {
    fprintf(stderr, "gpum pool replay: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  gpum_replay_log_info_t in;
  gpum_replay_log_info(log, &in);
  run_t runs[NSTRATEGIES];
  memset(runs, 0, sizeof runs);
  for (int i = 0; i < n && rc == 0; i++) {
    o.strategy = list[i];
    gpum_error_clear();
    rc = gpum_replay_run(log, &o, &runs[i].r);
    if (rc == 0 && a.find_min) {
      rc = gpum_replay_find_min_capacity(log, &o, &runs[i].min);
      runs[i].has_min = rc == 0;
    }
    if (rc)
      fprintf(stderr, "gpum pool replay: %s (%s): %s\n", a.path, gpum_pool_strategy_name(list[i]),
              cli_reason(rc));
  }
  gpum_replay_log_free(log);
  if (rc)
    return CLI_EXIT_FAIL;
  return replay_report(&a, &o, &in, runs, n, a.strategy && !strcasecmp(a.strategy, "all"));
}

/* ---- gen-trace ---- */

static const cli_arg_t gen_args[] = {
    {O_LAYERS, "--layers", 0, "N", "transformer blocks", 0},
    {O_HIDDEN, "--hidden", 0, "H", "hidden size", 0},
    {O_HEADS, "--heads", 0, "A", "attention heads", 0},
    {O_SEQ, "--seq", 0, "S", "the longest sequence; each step draws one from [S/2, S]", 0},
    {O_BATCH, "--batch", 0, "B", "samples per step", 0},
    {O_VOCAB, "--vocab", 0, "V", "vocabulary size", 0},
    {O_STEPS, "--steps", 0, "K", "training steps", 0},
    {O_DTYPE, "--dtype", 0, "fp16|bf16|fp32", "the activations' type (default fp16)", 0},
    {O_FLASH, "--flash", 0, NULL, "keep no seq x seq attention matrices (flash attention)", 0},
    {O_SEED, "--seed", 0, "X", "the random seed", 0},
    {O_OUTPUT, "--output", 0, "FILE", "write the log to FILE (default: stdout)", 0},
    {0},
};

static char gen_text[640];

static cli_cmd_spec_t gen_spec = {
    .name = "pool gen-trace",
    .usage = "transformer [--layers N] [--hidden H] [--heads A] [--seq S]\n"
             " [--batch B] [--vocab V] [--steps K] [--dtype fp16|bf16|fp32]\n"
             " [--flash] [--seed X] [--output FILE]",
    .summary = "Write a synthetic RMM CSV log of mixed-precision transformer training.",
    .text = gen_text, /* with the generator's defaults, set by gen_help_text() */
    .args = gen_args,
    .examples = "gpum pool gen-trace transformer --layers 24 --hidden 2048 --output t.csv\n"
                "gpum pool replay t.csv --strategy all",
    .exit_status = "0, 1 when the log cannot be written, 2 for usage errors.",
};

static void gen_help_text(void) {
  gpum_tracegen_transformer_t d;
  gpum_tracegen_transformer_init(&d);
  snprintf(gen_text, sizeof gen_text,
           "GPT-style blocks, Adam: weights and fp32 master copies first; per step a sequence\n"
           "length drawn from [S/2, S], forward activations kept until backward, temporaries\n"
           "freed at once, gradients until zero_grad, optimizer moments allocated on the first\n"
           "step. Defaults: --layers %u --hidden %u --heads %u --seq %u --batch %u --vocab %u\n"
           "--steps %u --dtype fp16 --seed %llu. Replay it with 'gpum pool replay FILE'.",
           d.layers, d.hidden, d.heads, d.seq, d.batch, d.vocab, d.steps,
           (unsigned long long)d.seed);
}

static int pool_gen_trace(int argc, char **argv) {
  gpum_tracegen_transformer_t p;
  gpum_tracegen_transformer_init(&p);
  const char *o[O_COUNT_] = {0}, *pos[1];
  gen_help_text();
  int np, rc = cli_args_collect(&gen_spec, argc, argv, o, O_COUNT_, pos, 0, 1, &np);
  if (rc != 0)
    return rc == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  const char *v[8] = {o[O_LAYERS], o[O_HIDDEN], o[O_HEADS], o[O_SEQ],
                      o[O_BATCH],  o[O_VOCAB],  o[O_STEPS], o[O_SEED]};
  const char *dtype = o[O_DTYPE], *output = o[O_OUTPUT];
  bool flash = o[O_FLASH] != NULL;
  if (np < 1 || strcmp(pos[0], "transformer")) {
    fprintf(stderr, "gpum pool gen-trace: %s%s%s (the one generator is 'transformer')\n",
            np ? "unknown generator '" : "missing generator", np ? pos[0] : "", np ? "'" : "");
    return CLI_EXIT_USAGE;
  }
  unsigned *fields[7] = {&p.layers, &p.hidden, &p.heads, &p.seq, &p.batch, &p.vocab, &p.steps};
  static const char *const names[7] = {"--layers", "--hidden", "--heads", "--seq",
                                       "--batch",  "--vocab",  "--steps"};
  unsigned long long x;
  for (int i = 0; i < 7; i++) {
    if (!v[i])
      continue;
    if (cli_parse_uint(v[i], 1, 0xffffffffu, false, &x))
      return bad_value("gen-trace", names[i], v[i], "a positive integer");
    *fields[i] = (unsigned)x;
  }
  if (v[7] && cli_parse_uint(v[7], 0, UINT64_MAX, false, &x))
    return bad_value("gen-trace", "--seed", v[7], "an integer");
  if (v[7])
    p.seed = x;
  if (dtype && (!strcasecmp(dtype, "fp16") || !strcasecmp(dtype, "bf16")))
    p.dtype_bytes = 2;
  else if (dtype && !strcasecmp(dtype, "fp32"))
    p.dtype_bytes = 4;
  else if (dtype)
    return bad_value("gen-trace", "--dtype", dtype, "fp16, bf16 or fp32");
  p.flash_attention = flash;
  FILE *out = stdout;
  if (output && !(out = fopen(output, "w"))) {
    fprintf(stderr, "gpum pool gen-trace: cannot create %s: %s\n", output, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  gpum_error_clear();
  rc = gpum_tracegen_transformer(&p, out, NULL);
  if (output && fclose(out) && rc == 0)
    rc = gpum_error(GPUM_EIO, "cannot write %s", output);
  if (rc) {
    fprintf(stderr, "gpum pool gen-trace: %s\n", cli_reason(rc));
    if (output)
      remove(output);
    return rc == GPUM_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

/* ---- gpum pool ---- */

static const cli_arg_t no_args[] = {{0}};

static const cli_cmd_spec_t *const pool_subs[] = {&replay_spec, &gen_spec, NULL};

static const cli_cmd_spec_t pool_spec = {
    .name = "pool",
    .usage = "COMMAND [ARGS]",
    .summary = "Tools for the caching pool allocator: replay allocation logs (docs/pool.md).",
    .args = no_args,
    .examples = "gpum pool gen-trace transformer --output t.csv\n"
                "gpum pool replay t.csv --strategy all",
    .exit_status = "0 success, 1 failure, 2 usage error.",
    .subs = pool_subs,
};

int cmd_pool(gpum_config_t *cfg, int argc, char **argv) {
  (void)cfg;
  if (argc < 2) {
    cli_args_help(&pool_spec, stderr);
    return CLI_EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
    gen_help_text();
    cli_args_help(&pool_spec, stdout);
    return CLI_EXIT_OK;
  }
  const cli_cmd_spec_t *spec = cli_args_find_sub(&pool_spec, sub);
  if (spec == &replay_spec)
    return pool_replay(argc - 1, argv + 1);
  if (spec == &gen_spec)
    return pool_gen_trace(argc - 1, argv + 1);
  return CLI_EXIT_USAGE;
}
