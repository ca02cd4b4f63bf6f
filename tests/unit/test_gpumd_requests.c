/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the socket face's request decoders (src/gpumd/ops/requests.c): a protocol request
 * becomes the struct its op core takes, with the protocol's defaults; a bad field is EINVAL
 * with the message naming it; a field the protocol checks only after the op's first check
 * (the reservation's lookup, the admin check) is kept in the request (late) and raised by the
 * core with the same code and text, the first such error winning. A flat line decodes to what
 * the same line parsed whole does. The cores and the REST face
 * are tested end to end in tests/integration (test_gpumd_*.sh, test_http_api.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include <gpum/error.h>

#include "gpumd.h"
#include "ops.h"

static json_t *req(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  assert_non_null(j);
  return j;
}

static gpumd_actor_t actor(void) {
  gpumd_actor_t a = {.uid = (uint32_t)getuid(), .pid = (int32_t)getpid()};
  return a;
}

static void test_reserve_full(void **state) {
  (void)state;
  gpumd_actor_t a = actor();
  json_t *j =
      req("{\"id\": 1, \"op\": \"reserve\", \"bytes_per_gpu\": \"2GiB\", \"gpus\": 2,"
          " \"model\": \"*H100*\", \"min_memory\": 1024, \"devices\": [\"0\", \"GPU-x\"],"
          " \"priority\": -5, \"timeout_ms\": 0, \"on_timeout\": \"wait\", \"label\": \"l\","
          " \"slurm\": {\"job_id\": \"12\", \"step_id\": \"batch\"}, \"lease\": \"ttl\","
          " \"ttl_ms\": 5000, \"wait\": false}");
  gpumd_reserve_req_t r;
  assert_int_equal(gpumd_reserve_decode(&a, j, &r), 0);
  assert_int_equal(r.q.bytes_per_gpu, 2ull << 30);
  assert_int_equal(r.q.gpus, 2);
  assert_string_equal(r.q.model, "*H100*");
  assert_int_equal(r.q.min_memory, 1024);
  assert_int_equal(r.q.device_count, 2);
  assert_ptr_equal(r.q.devices, r.devices);
  assert_string_equal(r.q.devices[1], "GPU-x");
  assert_int_equal(r.q.priority, -5);
  assert_true(r.timeout_set); /* 0 given: no queue timeout, not the default */
  assert_int_equal(r.q.timeout_ms, 0);
  assert_int_equal(r.q.on_timeout, GPUMD_ON_TIMEOUT_WAIT);
  assert_string_equal(r.q.label, "l");
  assert_string_equal(r.q.slurm_job, "12");
  assert_string_equal(r.q.slurm_step, "batch");
  assert_int_equal(r.q.lease, GPUMD_LEASE_TTL);
  assert_int_equal(r.q.ttl_ms, 5000);
  assert_true(r.q.no_wait);
  assert_int_equal(r.q.lease_pid, 0); /* the actor's, filled by the core */
  json_decref(j);
}

static void test_reserve_defaults(void **state) {
  (void)state;
  gpumd_actor_t a = actor();
  json_t *j = req("{\"op\": \"reserve\", \"bytes_per_gpu\": 1}");
  gpumd_reserve_req_t r;
  assert_int_equal(gpumd_reserve_decode(&a, j, &r), 0);
  assert_int_equal(r.q.gpus, 1);
  assert_null(r.q.model);
  assert_null(r.q.devices);
  assert_false(r.timeout_set); /* the core takes job_timeout */
  assert_int_equal(r.q.on_timeout, GPUMD_ON_TIMEOUT_REJECT);
  assert_int_equal(r.q.lease, GPUMD_LEASE_CONNECTION);
  assert_false(r.q.no_wait);
  json_decref(j);
}

/* Each bad request: its message, as docs/protocol.md and the tests of the daemon expect. */
static void test_reserve_errors(void **state) {
  (void)state;
  static const struct {
    const char *req, *msg;
  } cases[] = {
      {"{\"bytes_per_gpu\": 1, \"x\": 1}", "unknown field 'x'"},
      {"{}", "\"bytes_per_gpu\" is required and must be above 0"},
      {"{\"bytes_per_gpu\": \"8XB\"}",
       "\"bytes_per_gpu\" must be a size in bytes or a string such as \"8GiB\""},
      {"{\"bytes_per_gpu\": 1, \"gpus\": 65}", "\"gpus\" must be an integer from 1 to 64"},
      {"{\"bytes_per_gpu\": 1, \"devices\": [\"0\", 1]}",
       "\"devices\"[1] must be a string such as \"0\" or a UUID"},
      {"{\"bytes_per_gpu\": 1, \"on_timeout\": \"x\", \"lease\": \"y\"}",
       "\"on_timeout\": 'x' is not reject or wait"},
      {"{\"bytes_per_gpu\": 1, \"slurm\": {\"job_id\": \"1\", \"step_id\": \"0\", \"x\": 1}}",
       "\"slurm\": unknown field 'x' (it takes job_id and step_id)"},
      {"{\"bytes_per_gpu\": 1, \"pid\": 1}", "\"pid\" is only for \"lease\": \"pid\""},
      {"{\"bytes_per_gpu\": 1, \"lease\": \"ttl\"}", "\"lease\": \"ttl\" needs \"ttl_ms\""},
      {"{\"bytes_per_gpu\": 1, \"ttl_ms\": 5}", "\"ttl_ms\" is only for \"lease\": \"ttl\""},
  };
  gpumd_actor_t a = actor();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *j = req(cases[i].req);
    gpumd_reserve_req_t r;
    assert_int_equal(gpumd_reserve_decode(&a, j, &r), GPUM_EINVAL);
    assert_string_equal(gpum_last_error(), cases[i].msg);
    json_decref(j);
  }
}

static bool same_str(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* A flat line (gpumd_json_parse_flat) decodes as the same line parsed whole: the same struct,
 * or the same error and message, for reserve and release lines good and bad. */
static void test_flat_same_as_whole(void **state) {
  (void)state;
  static const char *const reserves[] = {
      "{\"id\":1,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}",
      ("{\"id\":\"x\",\"op\":\"reserve\",\"bytes_per_gpu\":\"2GiB\",\"gpus\":2,\"model\":\"*H100*"
       "\","
       "\"min_memory\":1024,\"priority\":-5,\"timeout_ms\":0,\"on_timeout\":\"wait\","
       "\"label\":\"l\",\"lease\":\"ttl\",\"ttl_ms\":5000,\"wait\":false}"),
      "{\"id\":2,\"op\":\"reserve\",\"bytes_per_gpu\":1,\"wait\":true,\"slurm\":null}",
      "{\"bytes_per_gpu\":1,\"x\":1}",
      "{}",
      "{\"bytes_per_gpu\":0}",
      "{\"bytes_per_gpu\":-1}",
      "{\"bytes_per_gpu\":\"8XB\"}",
      "{\"bytes_per_gpu\":true}",
      "{\"bytes_per_gpu\":null}",
      "{\"bytes_per_gpu\":1,\"gpus\":65}",
      "{\"bytes_per_gpu\":1,\"gpus\":\"2\"}",
      "{\"bytes_per_gpu\":1,\"model\":3}",
      "{\"bytes_per_gpu\":1,\"devices\":\"0\"}",
      "{\"bytes_per_gpu\":1,\"devices\":null}",
      "{\"bytes_per_gpu\":1,\"priority\":101}",
      "{\"bytes_per_gpu\":1,\"timeout_ms\":-1}",
      "{\"bytes_per_gpu\":1,\"on_timeout\":\"x\"}",
      "{\"bytes_per_gpu\":1,\"label\":null}",
      "{\"bytes_per_gpu\":1,\"slurm\":\"1\"}",
      "{\"bytes_per_gpu\":1,\"pid\":1}",
      "{\"bytes_per_gpu\":1,\"lease\":\"ttl\"}",
      "{\"bytes_per_gpu\":1,\"ttl_ms\":5}",
      "{\"bytes_per_gpu\":1,\"lease\":\"x\"}",
      "{\"bytes_per_gpu\":1,\"wait\":1}",
      "{\"bytes_per_gpu\":1,\"wait\":null}",
      "{\"bytes_per_gpu\":1,\"lease\":\"pid\",\"pid\":0}"};
  gpumd_actor_t a = actor();
  for (size_t i = 0; i < sizeof reserves / sizeof reserves[0]; i++) {
    const char *line = reserves[i];
    gpumd_flat_t flat;
    assert_true(gpumd_json_parse_flat(line, strlen(line), &flat));
    json_t *j = req(line);
    gpumd_reserve_req_t w, f;
    int rw = gpumd_reserve_decode(&a, j, &w);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gpum_last_error());
    int rf = gpumd_reserve_decode_flat(&a, &flat, &f);
    if (rw != rf)
      fail_msg("%s: whole %d (%s), flat %d (%s)", line, rw, msg, rf, gpum_last_error());
    if (rw != 0) {
      assert_string_equal(gpum_last_error(), msg);
    } else {
      assert_int_equal(w.q.bytes_per_gpu, f.q.bytes_per_gpu);
      assert_int_equal(w.q.gpus, f.q.gpus);
      assert_true(same_str(w.q.model, f.q.model));
      assert_int_equal(w.q.min_memory, f.q.min_memory);
      assert_int_equal(w.q.device_count, f.q.device_count);
      assert_int_equal(w.q.priority, f.q.priority);
      assert_int_equal(w.timeout_set, f.timeout_set);
      assert_int_equal(w.q.timeout_ms, f.q.timeout_ms);
      assert_int_equal(w.q.on_timeout, f.q.on_timeout);
      assert_true(same_str(w.q.label, f.q.label));
      assert_true(same_str(w.q.slurm_job, f.q.slurm_job));
      assert_int_equal(w.q.lease, f.q.lease);
      assert_int_equal(w.q.lease_pid, f.q.lease_pid);
      assert_int_equal(w.q.ttl_ms, f.q.ttl_ms);
      assert_int_equal(w.q.no_wait, f.q.no_wait);
    }
    json_decref(j);
  }
  static const char *const releases[] = {"{\"id\":1,\"op\":\"release\",\"reservation\":\"r-12\"}",
                                         "{\"reservation\":\"r-0\"}",
                                         "{\"reservation\":12}",
                                         "{}",
                                         "{\"reservation\":\"r-1\",\"x\":true}",
                                         "{\"reservation\":\"x-1\"}"};
  for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++) {
    const char *line = releases[i];
    gpumd_flat_t flat;
    assert_true(gpumd_json_parse_flat(line, strlen(line), &flat));
    json_t *j = req(line);
    gpumd_release_req_t w, f;
    int rw = gpumd_release_decode(j, &w);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gpum_last_error());
    assert_int_equal(gpumd_release_decode_flat(&flat, &f), rw);
    if (rw != 0) {
      assert_string_equal(gpum_last_error(), msg);
    } else {
      assert_int_equal(w.resv.id, f.resv.id);
      assert_string_equal(w.resv.text, f.resv.text);
    }
    json_decref(j);
  }
}

static void test_resv_ref(void **state) {
  (void)state;
  gpumd_resv_ref_t ref;
  assert_int_equal(gpumd_resv_ref_decode("r-42", &ref), 0);
  assert_int_equal(ref.id, 42);
  assert_string_equal(ref.text, "r-42");
  assert_int_equal(gpumd_resv_ref_decode(NULL, &ref), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(),
                      "\"reservation\" must be a reservation id such as \"r-1\"");
  assert_int_equal(gpumd_resv_ref_decode("abc", &ref), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"reservation\": 'abc' is not an id such as \"r-1\"");
  json_t *j = req("{\"reservation\": 5}"); /* not a string: as none */
  gpumd_release_req_t rel;
  assert_int_equal(gpumd_release_decode(j, &rel), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(),
                      "\"reservation\" must be a reservation id such as \"r-1\"");
  json_decref(j);
}

/* A bad ttl_ms is reported after the lookup: the decoder keeps it, the core raises it. */
static void test_renew_late(void **state) {
  (void)state;
  gpumd_renew_req_t r;
  json_t *j = req("{\"reservation\": \"r-3\", \"ttl_ms\": 0}");
  assert_int_equal(gpumd_renew_decode(j, &r), 0);
  assert_int_equal(r.resv.id, 3);
  assert_int_equal(r.late.rc, GPUM_EINVAL);
  gpum_error_clear();
  assert_int_equal(gpumd_req_error_raise(&r.late), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"ttl_ms\" must be an integer from 1 to 2592000000");
  json_decref(j);
  j = req("{\"reservation\": \"r-3\"}");
  assert_int_equal(gpumd_renew_decode(j, &r), 0);
  assert_false(r.ttl_set);
  assert_int_equal(gpumd_req_error_raise(&r.late), 0);
  json_decref(j);
  j = req("{\"reservation\": \"x\", \"ttl_ms\": 0}"); /* the id comes first, at once */
  assert_int_equal(gpumd_renew_decode(j, &r), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"reservation\": 'x' is not an id such as \"r-1\"");
  json_decref(j);
}

static void test_resize_and_report(void **state) {
  (void)state;
  gpumd_resize_req_t z;
  json_t *j = req("{\"reservation\": \"r-1\", \"bytes_per_gpu\": \"8GiB\"}");
  assert_int_equal(gpumd_resize_decode(j, &z), 0);
  assert_int_equal(z.bytes_per_gpu, 8ull << 30);
  assert_int_equal(z.late.rc, 0);
  json_decref(j);
  j = req("{\"reservation\": \"r-1\", \"bytes_per_gpu\": 0}");
  assert_int_equal(gpumd_resize_decode(j, &z), 0);
  assert_int_equal(gpumd_req_error_raise(&z.late), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"bytes_per_gpu\" is required and must be above 0");
  json_decref(j);
  gpumd_report_req_t p;
  j = req("{\"reservation\": \"r-1\", \"figures\": {\"a\": 1}}");
  assert_int_equal(gpumd_report_decode(j, &p), 0);
  assert_int_equal(gpumd_req_error_raise(&p.late), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "a report needs \"source\", such as \"batcher.infer\"");
  json_decref(j);
}

/* disable: field errors come after the admin check, the reason's before the device's. */
static void test_switch(void **state) {
  (void)state;
  gpumd_switch_req_t s;
  json_t *j = req("{\"device\": 1, \"reason\": \"\"}");
  assert_int_equal(gpumd_switch_decode(j, true, &s), 0);
  assert_string_equal(s.device, "1");
  assert_null(s.reason); /* "": the default reason */
  assert_int_equal(s.late.rc, 0);
  json_decref(j);
  j = req("{\"device\": 1.5, \"reason\": 5}");
  assert_int_equal(gpumd_switch_decode(j, true, &s), 0);
  assert_int_equal(gpumd_req_error_raise(&s.late), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"reason\" must be a text of at most 255 bytes");
  json_decref(j);
  j = req("{\"device\": \"\"}");
  assert_int_equal(gpumd_switch_decode(j, false, &s), 0);
  assert_int_equal(gpumd_req_error_raise(&s.late), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"device\" must be a device index or UUID");
  json_decref(j);
  j = req("{\"device\": \"GPU-1\", \"reason\": \"x\"}"); /* enable takes no reason */
  assert_int_equal(gpumd_switch_decode(j, false, &s), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "unknown field 'reason'");
  json_decref(j);
}

static void test_list_and_status(void **state) {
  (void)state;
  gpumd_list_req_t l;
  json_t *j = req("{\"all\": true}");
  assert_int_equal(gpumd_list_decode(j, &l), 0);
  assert_true(l.all);
  assert_false(l.ended);
  json_decref(j);
  j = req("{\"ended\": 1}");
  assert_int_equal(gpumd_list_decode(j, &l), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"ended\" must be true or false");
  json_decref(j);
  j = req("{\"op\": \"status\", \"all\": true}");
  assert_int_equal(gpumd_status_decode(j), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "unknown field 'all'");
  json_decref(j);
}

/* alerts: 100 history entries unless "limit" (0 to 100000) says otherwise. */
static void test_alerts(void **state) {
  (void)state;
  gpumd_alerts_req_t r;
  json_t *j = req("{\"op\": \"alerts\"}");
  assert_int_equal(gpumd_alerts_decode(j, &r), 0);
  assert_int_equal(r.limit, 100);
  json_decref(j);
  j = req("{\"limit\": 0}");
  assert_int_equal(gpumd_alerts_decode(j, &r), 0);
  assert_int_equal(r.limit, 0);
  json_decref(j);
  j = req("{\"limit\": 100001}");
  assert_int_equal(gpumd_alerts_decode(j, &r), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "\"limit\" must be an integer from 0 to 100000");
  json_decref(j);
  j = req("{\"limit\": \"5\", \"max\": 1}"); /* the unknown field is said first */
  assert_int_equal(gpumd_alerts_decode(j, &r), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "unknown field 'max'");
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reserve_full),   cmocka_unit_test(test_reserve_defaults),
      cmocka_unit_test(test_reserve_errors), cmocka_unit_test(test_resv_ref),
      cmocka_unit_test(test_renew_late),     cmocka_unit_test(test_resize_and_report),
      cmocka_unit_test(test_switch),         cmocka_unit_test(test_list_and_status),
      cmocka_unit_test(test_alerts),         cmocka_unit_test(test_flat_same_as_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
