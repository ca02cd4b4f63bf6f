/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for log replay (include/gpum/pool_replay.h): the RMM CSV parser (both Time formats
 * and decimal seconds, every malformed-row rejection with its line number, allocate-failure
 * rows, unknown and double frees, reused pointers, zero sizes, per-thread order and the merge of
 * threads by Time), the replay against the pool on a simulated source (peaks, OOM counting with
 * and without stopping, skipped frees of failed allocations) checked against values computed by
 * hand, the capacity bisection on logs whose answer is known, the transformer generator
 * (deterministic, well formed, everything it allocates in a step freed), and 3000 mutated logs
 * that are read or rejected (and replayed when read) without a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/pool.h>
#include <gpum/pool_replay.h>

#include "pool/replay_internal.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define HDR "Thread,Time,Action,Pointer,Size,Stream\n"

/* Reads text as a log named "t.csv"; returns the code, *log set on success. */
static int read_text(const char *text, gpum_replay_log_t **log) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  assert_non_null(f);
  gpum_error_clear();
  int rc = gpum_replay_log_read(f, "t.csv", log);
  fclose(f);
  return rc;
}

static gpum_replay_log_t *must_read(const char *text) {
  gpum_replay_log_t *log = NULL;
  int rc = read_text(text, &log);
  if (rc)
    fail_msg("read failed: %s", gpum_last_error());
  return log;
}

/* ---- Time ---- */

static void test_time_formats(void **state) {
  (void)state;
  uint64_t s;
  uint32_t ns;
  int clock;
  assert_int_equal(gpum__replay_parse_time("0", &s, &ns, &clock), 0);
  assert_true(s == 0 && ns == 0 && !clock);
  assert_int_equal(gpum__replay_parse_time("1048576", &s, &ns, &clock), 0);
  assert_true(s == 1048576 && ns == 0 && !clock);
  assert_int_equal(gpum__replay_parse_time("12:34:56.789012", &s, &ns, &clock), 0);
  assert_true(s == 12 * 3600 + 34 * 60 + 56 && ns == 789012000 && clock);
  assert_int_equal(gpum__replay_parse_time("1:02:03", &s, &ns, &clock), 0);
  assert_true(s == 3723 && ns == 0 && clock);
  assert_int_equal(gpum__replay_parse_time("23:59:59.123456789", &s, &ns, &clock), 0);
  assert_true(s == 86399 && ns == 123456789);
  assert_int_equal(gpum__replay_parse_time("1634567890.5", &s, &ns, &clock), 0);
  assert_true(s == 1634567890 && ns == 500000000 && !clock);
  static const char *const bad[] = {
      "",      "-1",           "+1",       "1e3",       "1.",
      ".5",    "1.1234567890", "24:00:00", "12:60:00",  "12:3:00",
      "12:03", "12:03:61",     "a:00:00",  "12:00:00x", "18446744073709551616",
      "1 2",   "123:00:00",    "12:00:00."};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (gpum__replay_parse_time(bad[i], &s, &ns, &clock) != GPUM_EPARSE)
      fail_msg("time '%s' accepted", bad[i]);
}

/* ---- rejections ---- */

typedef struct {
  const char *text;
  const char *want; /* substring of the detail, with the line number */
} bad_t;

static void test_rejects_malformed(void **state) {
  (void)state;
  static const bad_t cases[] = {
      {"", "t.csv: empty"},
      {"\n\n", "t.csv: empty"},
      {"Thread,Time,Action,Pointer,Size\n", "t.csv:1: not an RMM CSV log"},
      {"\nid,time,action,ptr,size,stream\n", "t.csv:2: not an RMM CSV log"},
      {HDR "0,0,allocate,0x10,512\n", "t.csv:2: expected 6 columns"},
      {HDR "0,0,allocate,0x10,512,0,7\n", "t.csv:2: expected 6 columns (Thread,Time,Action,"
                                          "Pointer,Size,Stream), found 7"},
      {HDR "0,0,allocate,0x10,512,0\n\nt1,1,free,0x10,512,0\n", "t.csv:4: bad Thread 't1'"},
      {HDR "0,x,allocate,0x10,512,0\n", "t.csv:2: bad Time 'x'"},
      {HDR "0,25:00:00.000000,allocate,0x10,512,0\n", "t.csv:2: bad Time '25:00:00.000000'"},
      {HDR "0,0,alloc,0x10,512,0\n", "t.csv:2: bad Action 'alloc'"},
      {HDR "0,0,allocate,16,512,0\n", "t.csv:2: bad Pointer '16'"},
      {HDR "0,0,allocate,0xZZ,512,0\n", "t.csv:2: bad Pointer '0xZZ'"},
      {HDR "0,0,allocate,0x,512,0\n", "t.csv:2: bad Pointer '0x'"},
      {HDR "0,0,allocate,0x10000000000000000,512,0\n", "t.csv:2: bad Pointer"},
      {HDR "0,0,allocate,0x10,-5,0\n", "t.csv:2: bad Size '-5'"},
      {HDR "0,0,allocate,0x10,1e3,0\n", "t.csv:2: bad Size '1e3'"},
      {HDR "0,0,allocate,0x10,,0\n", "t.csv:2: bad Size ''"},
      {HDR "0,0,allocate,0x10,18446744073709551616,0\n", "t.csv:2: bad Size"},
      {HDR "0,0,allocate,0x10,512,s\n", "t.csv:2: bad Stream 's'"},
      {HDR "0,0,allocate,0x10,512,0x\n", "t.csv:2: bad Stream '0x'"},
      {HDR "0,0,allocate,0x10,512,0\n0,1,free,0x10,512,0\n0,2,free,0x10,512\n",
       "t.csv:4: expected 6 columns"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpum_replay_log_t *log = NULL;
    int rc = read_text(cases[i].text, &log);
    if (rc != GPUM_EPARSE || log)
      fail_msg("case %zu: rc %d, log %p", i, rc, (void *)log);
    if (!strstr(gpum_last_error(), cases[i].want))
      fail_msg("case %zu: detail '%s' lacks '%s'", i, gpum_last_error(), cases[i].want);
  }
}

static void test_rejects_long_line_and_nul(void **state) {
  (void)state;
  size_t n = 10000;
  char *text = malloc(n + 256);
  assert_non_null(text);
  int w = snprintf(text, 256, HDR "0,0,allocate,0x10,512,0\n0,1,free,0x10,");
  assert_true(w > 0 && w < 256);
  memset(text + w, '5', n);
  text[w + n] = '\0';
  gpum_replay_log_t *log = NULL;
  assert_int_equal(read_text(text, &log), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "t.csv:3: line longer than 4096 bytes"));
  free(text);

  static const char nul[] = HDR "0,0,allocate,0x10,512,0\n0,1,fr\0ee,0x10,512,0\n";
  FILE *f = fmemopen((void *)nul, sizeof nul - 1, "r");
  assert_non_null(f);
  assert_int_equal(gpum_replay_log_read(f, "t.csv", &log), GPUM_EPARSE);
  fclose(f);
  assert_non_null(strstr(gpum_last_error(), "t.csv:3: NUL byte"));
}

static void test_open_missing_file(void **state) {
  (void)state;
  gpum_replay_log_t *log = NULL;
  assert_int_equal(gpum_replay_log_open("/nonexistent/gpum-replay.csv", &log), GPUM_ENOENT);
  assert_null(log);
  assert_non_null(strstr(gpum_last_error(), "/nonexistent/gpum-replay.csv"));
  assert_int_equal(gpum_replay_log_read(NULL, "x", &log), GPUM_EINVAL);
}

/* Mutated logs (bytes flipped, cut, duplicated) are read or rejected, never crash. */
static void test_mutations_never_crash(void **state) {
  (void)state;
  static const char base[] = HDR "1,10:00:00.000001,allocate,0x7f0000000000,1048576,0x0\n"
                                 "2,10:00:00.000002,allocate,0x7f0000100000,512,0x7f00\n"
                                 "1,10:00:00.000003,free,0x7f0000000000,1048576,0x0\n"
                                 "2,10:00:00.000004,allocate failure,(nil),4096,0x0\n"
                                 "2,10:00:00.000005,free,0x7f0000100000,512,0x7f00\n";
  static const char alphabet[] = "0123456789abcdefx,:.\n\r -(nil)Zallocatefree\"";
  char buf[sizeof base * 2];
  uint64_t seed = 12345;
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = sizeof base - 1;
    memcpy(buf, base, n);
    int edits = 1 + iter % 4;
    for (int e = 0; e < edits; e++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(seed >> 33) % n;
      char c = alphabet[(seed >> 20) % (sizeof alphabet - 1)];
      switch ((seed >> 40) % 3) {
      case 0: /* replace */
        buf[at] = c;
        break;
      case 1: /* delete */
        memmove(buf + at, buf + at + 1, n - at - 1);
        n--;
        break;
      default: /* insert */
        if (n + 1 < sizeof buf) {
          memmove(buf + at + 1, buf + at, n - at);
          buf[at] = c;
          n++;
        }
      }
    }
    FILE *f = fmemopen(buf, n, "r");
    assert_non_null(f);
    gpum_replay_log_t *log = NULL;
    int rc = gpum_replay_log_read(f, "m.csv", &log);
    fclose(f);
    if (rc != 0 && rc != GPUM_EPARSE)
      fail_msg("iteration %d: rc %d (%s)", iter, rc, gpum_last_error());
    if (rc == 0) {
      gpum_replay_log_info_t in;
      gpum_replay_log_info(log, &in);
      assert_true(in.allocs + in.zero_size + in.alloc_failures + in.frees + in.unknown_frees <=
                  in.rows);
      /* Whatever sizes the mutation made, the replay completes or fails cleanly. */
      gpum_replay_opts_t o;
      gpum_replay_opts_init(&o);
      o.capacity = 64 * MiB;
      o.measure_fragmentation = false;
      gpum_replay_result_t r;
      rc = gpum_replay_run(log, &o, &r);
      if (rc == 0)
        assert_true(r.allocs + r.ooms <= in.allocs);
      gpum_replay_log_free(log);
    } else {
      assert_null(log);
      assert_non_null(strstr(gpum_last_error(), "m.csv"));
    }
  }
}

/* ---- accepted logs ---- */

static void test_counts_and_peak(void **state) {
  (void)state;
  /* Live: a=1000 | a,b=4000 | b=3000 | b,c=3512 | b,c,d=3512+9000 (peak 12512) | ... */
  gpum_replay_log_t *log =
      must_read("\xef\xbb\xbf thread , time , action , pointer , size , stream \r\n"
                "7,0,allocate,0x1000,1000,0\r\n"
                "7,1,allocate,0x2000,3000,0x0\n"
                "\n"
                "7,2,free,0x1000,1000,0\n"
                "7,3,allocate failure,0x0,1048576,0\n"
                "7,4,allocate failure,(nil),5,0\n"
                "7,5,allocate,0x3000,512,0\n"
                "7,6,free,0x9999,64,0\n"   /* unknown */
                "7,7,free,0x1000,1000,0\n" /* double free: unknown */
                "7,8,allocate,0x4000,9000,\"0x7f00\"\n"
                "7,9,allocate,0x5000,0,0\n" /* zero size */
                "7,10,free,0x5000,0,0\n"    /* its free is dropped silently */
                "7,11,deallocate,0x4000,9000,0x7f00\n"
                "7,12,allocate,0x3000,100,0\n"); /* reuses a live pointer: the 512 leaks */
  gpum_replay_log_info_t in;
  gpum_replay_log_info(log, &in);
  assert_int_equal(in.rows, 13);
  assert_int_equal(in.allocs, 5);
  assert_int_equal(in.frees, 2);
  assert_int_equal(in.alloc_failures, 2);
  assert_int_equal(in.unknown_frees, 2);
  assert_int_equal(in.zero_size, 1);
  assert_int_equal(in.reused_pointers, 1);
  assert_int_equal(in.threads, 1);
  assert_int_equal(in.streams, 2);
  assert_int_equal(in.peak_live_bytes, 12512);
  assert_int_equal(in.peak_live_blocks, 3);
  assert_int_equal(in.live_at_end, 3); /* b, the leaked 512, the last 100 */
  assert_int_equal(in.max_size, 9000);
  assert_int_equal(in.min_size, 100);
  /* ops: 5 allocs + 2 frees, lines as in the file, free ends the right slot */
  assert_int_equal(log->nops, 7);
  static const uint32_t lines[] = {2, 3, 5, 8, 11, 14, 15};
  for (size_t i = 0; i < 7; i++)
    assert_int_equal(gpum__replay_op_line(&log->ops[i]), lines[i]);
  assert_true(gpum__replay_op_is_free(&log->ops[2]));
  assert_int_equal(log->ops[2].slot, log->ops[0].slot);
  assert_int_equal(log->ops[4].stream, 0x7f00);
  assert_int_equal(log->ops[5].slot, log->ops[4].slot);
  assert_true(log->nslots <= 4);
  gpum_replay_log_free(log);
}

/* Lines of the ops in replay order. */
static void assert_order(const gpum_replay_log_t *log, const uint32_t *lines, size_t n) {
  assert_int_equal(log->nops, n);
  for (size_t i = 0; i < n; i++)
    if (gpum__replay_op_line(&log->ops[i]) != lines[i])
      fail_msg("op %zu: line %u, expected %u", i, gpum__replay_op_line(&log->ops[i]), lines[i]);
}

static void test_thread_order(void **state) {
  (void)state;
  /* Thread 1's rows first, then thread 2's: merged by time. */
  gpum_replay_log_t *log = must_read(HDR "1,1,allocate,0x10,512,0\n" /* 2 */
                                         "1,5,free,0x10,512,0\n"     /* 3 */
                                         "1,9,allocate,0x30,512,0\n" /* 4 */
                                         "2,2,allocate,0x20,512,0\n" /* 5 */
                                         "2,5,free,0x20,512,0\n"     /* 6 */
                                         "2,10,free,0x30,512,0\n");  /* 7 */
  static const uint32_t want[] = {2, 5, 3, 6, 4, 7};
  assert_order(log, want, 6);
  gpum_replay_log_free(log);

  /* Each thread keeps its own order even when its times go back; ties go by row. */
  log = must_read(HDR "0x1,5,allocate,0x10,512,0\n" /* 2 */
                      "0x1,1,free,0x10,512,0\n"     /* 3 */
                      "2,3,allocate,0x20,512,0\n"   /* 4 */
                      "2,5,free,0x20,512,0\n");     /* 5 */
  static const uint32_t want2[] = {4, 2, 3, 5};
  assert_order(log, want2, 4);
  gpum_replay_log_free(log);

  /* One thread: row order whatever the times say. */
  log = must_read(HDR "0,9,allocate,0x10,512,0\n0,1,allocate,0x20,512,0\n");
  static const uint32_t want3[] = {2, 3};
  assert_order(log, want3, 2);
  gpum_replay_log_free(log);
}

static void test_clock_times_and_midnight(void **state) {
  (void)state;
  /* A free on thread 2 just after midnight must come after thread 1's allocation at 23:59. */
  gpum_replay_log_t *log =
      must_read(HDR "2,00:00:00.000100,free,0x10,512,0\n"       /* 2: next day */
                    "1,23:59:59.999900,allocate,0x10,512,0\n"   /* 3 */
                    "1,00:00:00.000200,allocate,0x20,512,0\n"); /* 4: next day too */
  static const uint32_t want[] = {3, 4};
  gpum_replay_log_info_t in;
  gpum_replay_log_info(log, &in);
  /* Row 2 comes first in the file and is read as 00:00 of day 0 (no wrap yet): it is before
   * the allocation, so its free is unknown. The wrap is detected at row 4. */
  assert_int_equal(in.unknown_frees, 1);
  assert_order(log, want, 2);
  gpum_replay_log_free(log);

  log = must_read(HDR "1,23:59:59.999900,allocate,0x10,512,0\n"   /* 2 */
                      "2,00:00:00.000100,free,0x10,512,0\n"       /* 3: next day */
                      "1,00:00:00.000200,allocate,0x20,512,0\n"); /* 4 */
  static const uint32_t want2[] = {2, 3, 4};
  assert_order(log, want2, 3);
  gpum_replay_log_info(log, &in);
  assert_int_equal(in.unknown_frees, 0);
  assert_int_equal(in.threads, 2);
  gpum_replay_log_free(log);
}

/* ---- replays ---- */

static gpum_replay_result_t must_run(const gpum_replay_log_t *log, const gpum_replay_opts_t *o) {
  gpum_replay_result_t r;
  int rc = gpum_replay_run(log, o, &r);
  if (rc)
    fail_msg("replay failed: %s", gpum_last_error());
  return r;
}

static void test_replay_by_hand(void **state) {
  (void)state;
  /* Rounded to 512: 1000->1024, 3000->3072, 512; allocated peaks at 1024+3072 = 4096 bytes;
   * requested at 4000; one 2 MiB small segment. */
  gpum_replay_log_t *log = must_read(HDR "0,0,allocate,0x10,1000,0\n"
                                         "0,1,allocate,0x20,3000,0\n"
                                         "0,2,free,0x10,1000,0\n"
                                         "0,3,allocate,0x30,512,0\n"
                                         "0,4,free,0x20,3000,0\n"
                                         "0,5,free,0x30,512,0\n");
  gpum_replay_opts_t o;
  gpum_replay_opts_init(&o);
  assert_string_equal(o.source, "simulated");
  gpum_replay_result_t r = must_run(log, &o);
  assert_int_equal(r.ops, 6);
  assert_int_equal(r.allocs, 3);
  assert_int_equal(r.frees, 3);
  assert_int_equal(r.ooms, 0);
  assert_int_equal(r.peak_allocated, 4096);
  assert_int_equal(r.peak_requested, 4000);
  assert_int_equal(r.peak_live, 4000);
  assert_int_equal(r.peak_reserved, 2 * MiB);
  assert_true(r.reserved_ratio == (double)(2 * MiB) / 4096.0);
  assert_true(r.fragmentation_at_peak >= 0 && r.fragmentation_at_peak <= 1);
  assert_true(r.elapsed_ns > 0 && r.ns_per_op > 0);
  gpum_replay_log_free(log);
}

static void test_replay_oom(void **state) {
  (void)state;
  /* Capacity 2 MiB: two 1 MiB blocks fill the one small segment; the third allocation fails,
   * its free is skipped, and after a free the next allocation fits again. */
  gpum_replay_log_t *log = must_read(HDR "0,0,allocate,0x10,1048576,0\n"
                                         "0,1,allocate,0x20,1048576,0\n"
                                         "0,2,allocate,0x30,512,0\n" /* line 4: OOM */
                                         "0,3,free,0x30,512,0\n"
                                         "0,4,free,0x10,1048576,0\n"
                                         "0,5,allocate,0x40,512,0\n");
  gpum_replay_opts_t o;
  gpum_replay_opts_init(&o);
  o.capacity = 2 * MiB;
  gpum_replay_result_t r = must_run(log, &o);
  assert_int_equal(r.ooms, 1);
  assert_int_equal(r.first_oom_line, 4);
  assert_int_equal(r.failed_frees, 1);
  assert_int_equal(r.allocs, 3);
  assert_int_equal(r.frees, 1);
  assert_false(r.stopped);
  assert_int_equal(r.peak_reserved, 2 * MiB);

  o.stop_on_oom = true;
  r = must_run(log, &o);
  assert_true(r.stopped);
  assert_int_equal(r.ooms, 1);
  assert_int_equal(r.allocs, 2);
  assert_int_equal(r.frees, 0);
  gpum_replay_log_free(log);
}

static void test_replay_bad_options(void **state) {
  (void)state;
  gpum_replay_log_t *log = must_read(HDR "0,0,allocate,0x10,512,0\n");
  gpum_replay_opts_t o;
  gpum_replay_opts_init(&o);
  o.source = "no-such-source";
  gpum_replay_result_t r;
  assert_int_equal(gpum_replay_run(log, &o, &r), GPUM_EINVAL);
  assert_int_equal(gpum_replay_run(NULL, &o, &r), GPUM_EINVAL);
  gpum_replay_log_free(log);
}

static void test_min_capacity_known(void **state) {
  (void)state;
  /* One 30 MiB request (over 10 MiB: its own segment of exactly 30 MiB): the answer is 30 MiB,
   * within the resolution (0.1% of 30 MiB). */
  gpum_replay_log_t *log = must_read(HDR "0,0,allocate,0x10,31457280,0\n"
                                         "0,1,free,0x10,31457280,0\n"
                                         "0,2,allocate,0x20,31457280,0\n");
  gpum_replay_min_capacity_t mc;
  assert_int_equal(gpum_replay_find_min_capacity(log, NULL, &mc), 0);
  assert_int_equal(mc.peak_live, 30 * MiB);
  assert_int_equal(mc.resolution, 30 * MiB / 1000);
  assert_true(mc.min_capacity >= 30 * MiB);
  assert_true(mc.min_capacity <= 30 * MiB + mc.resolution);
  assert_true(mc.failed_below < 30 * MiB);
  assert_true(mc.min_capacity - mc.failed_below <= mc.resolution);
  assert_true(mc.ratio_to_live >= 1.0 && mc.ratio_to_live <= 1.001);
  assert_true(mc.runs >= 2); /* unlimited, then the capacity it reserved */
  /* And it does fit there, and not below. */
  gpum_replay_opts_t o;
  gpum_replay_opts_init(&o);
  o.capacity = mc.min_capacity;
  assert_int_equal(must_run(log, &o).ooms, 0);
  o.capacity = mc.failed_below;
  assert_int_equal(must_run(log, &o).ooms, 2); /* both allocations fail */
  gpum_replay_log_free(log);

  /* 12 MiB freed, then 14 MiB: the cached 12 MiB segment must go back to the source (a retry)
   * for a 14 MiB capacity to suffice. */
  log = must_read(HDR "0,0,allocate,0x10,12582912,0\n"
                      "0,1,free,0x10,12582912,0\n"
                      "0,2,allocate,0x20,14680064,0\n");
  assert_int_equal(gpum_replay_find_min_capacity(log, NULL, &mc), 0);
  assert_true(mc.min_capacity >= 14 * MiB && mc.min_capacity <= 14 * MiB + mc.resolution);
  o.capacity = 14 * MiB;
  gpum_pool_opts_t po; /* the whole device may be cached: the OOM ladder gives it back */
  gpum_pool_opts_init(&po);
  po.cache_limit_fraction = 1.0;
  o.pool_opts = &po;
  gpum_replay_result_t r = must_run(log, &o);
  assert_int_equal(r.ooms, 0);
  assert_true(r.retries >= 1);
  /* By default, with no limit, the cache is bounded by 1/8 of the device: the freed 12 MiB
   * segment goes back when it is freed, and no retry is needed. */
  o.pool_opts = NULL;
  r = must_run(log, &o);
  assert_int_equal(r.ooms, 0);
  assert_int_equal(r.retries, 0);
  gpum_replay_log_free(log);

  /* Nothing live: 0. */
  log = must_read(HDR "0,0,free,0x10,512,0\n");
  assert_int_equal(gpum_replay_find_min_capacity(log, NULL, &mc), 0);
  assert_int_equal(mc.min_capacity, 0);
  gpum_replay_log_free(log);
}

/* ---- generator ---- */

static char *gen(const gpum_tracegen_transformer_t *p, uint64_t *events) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(gpum_tracegen_transformer(p, f, events), 0);
  fclose(f);
  return buf;
}

static void test_tracegen(void **state) {
  (void)state;
  gpum_tracegen_transformer_t p;
  gpum_tracegen_transformer_init(&p);
  p.layers = 2;
  p.hidden = 256;
  p.heads = 4;
  p.seq = 128;
  p.batch = 2;
  p.vocab = 1000;
  p.steps = 3;
  uint64_t n1, n2;
  char *a = gen(&p, &n1), *b = gen(&p, &n2);
  assert_string_equal(a, b); /* deterministic */
  assert_int_equal(n1, n2);
  free(b);
  gpum_replay_log_t *log = must_read(a);
  gpum_replay_log_info_t in;
  gpum_replay_log_info(log, &in);
  assert_int_equal(in.rows, n1);
  assert_int_equal(in.unknown_frees, 0);
  assert_int_equal(in.reused_pointers, 0);
  assert_int_equal(in.allocs, in.frees + in.live_at_end);
  /* What stays: weights, master weights, two Adam moments per parameter tensor. */
  uint64_t params = 3 + 2 * 10;
  assert_int_equal(in.live_at_end, 4 * params);
  gpum_replay_log_free(log);
  free(a);

  p.seed = 2;
  b = gen(&p, &n2);
  log = must_read(b);
  gpum_replay_log_free(log);
  free(b);

  p.hidden = 102; /* not a multiple of heads */
  FILE *f = fopen("/dev/null", "w");
  assert_non_null(f);
  assert_int_equal(gpum_tracegen_transformer(&p, f, NULL), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "hidden"));
  p.hidden = 256;
  p.layers = 0;
  assert_int_equal(gpum_tracegen_transformer(&p, f, NULL), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "layers"));
  fclose(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_time_formats),
      cmocka_unit_test(test_rejects_malformed),
      cmocka_unit_test(test_rejects_long_line_and_nul),
      cmocka_unit_test(test_open_missing_file),
      cmocka_unit_test(test_mutations_never_crash),
      cmocka_unit_test(test_counts_and_peak),
      cmocka_unit_test(test_thread_order),
      cmocka_unit_test(test_clock_times_and_midnight),
      cmocka_unit_test(test_tracegen),
      cmocka_unit_test(test_replay_by_hand),
      cmocka_unit_test(test_replay_oom),
      cmocka_unit_test(test_replay_bad_options),
      cmocka_unit_test(test_min_capacity_known),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
