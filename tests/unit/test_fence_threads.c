/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the reservation's memory fence (src/lib/client/fence.c, gpum/fence.h): charges
 * stop at the limit to the byte; two processes share one limit; a process killed with SIGKILL
 * gives its bytes back at the next charge that needs them, and its bytes stop counting in the
 * usage at once; a child after fork gets a slot of its own; 64 threads charging and giving back
 * at random never pass the limit and leave the counter at zero. Names cannot be guessed; a
 * region is never created over, or opened through, a file that was there (another user's, a
 * symbolic link), is mode 0600 and is only opened when its owner is the one expected; the
 * shim's own regions whose processes are all gone are swept. What the job used (managed, IPC)
 * is marked by any process, seen through a read-only handle with the first marker's pid, and
 * never cleared; a region of the previous version is refused. Runs under ThreadSanitizer too
 * (the _threads suffix); the tests that fork run before any thread is started.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/fence.h>

#define GiB (1024ULL * 1024 * 1024)

static char name[GPUM_FENCE_NAME_MAX];

static gpum_fence *make(uint64_t limit) {
  static unsigned n;
  snprintf(name, sizeof name, "gpum-test-fence-%d-%u", (int)getpid(), n++);
  gpum_fence *f = NULL;
  gpum_fence_opts_t o = {.limit = limit, .reservation = 7};
  assert_int_equal(gpum_fence_create(name, &o, &f), 0);
  return f;
}

static void drop(gpum_fence *f) {
  gpum_fence_close(f);
  assert_int_equal(gpum_fence_unlink(name), 0);
}

static uint64_t used(gpum_fence *f, unsigned dev) {
  gpum_fence_usage_t u;
  assert_int_equal(gpum_fence_usage(f, dev, &u), 0);
  return u.used;
}

static void test_limit_to_the_byte(void **state) {
  (void)state;
  gpum_fence *f = make(4 * GiB);
  uint64_t before = 1;
  assert_int_equal(gpum_fence_charge(f, 0, 3 * GiB, &before), 0);
  assert_int_equal(before, 0);
  assert_int_equal(gpum_fence_charge(f, 0, GiB + 1, &before), GPUM_EDEVOOM);
  assert_int_equal(before, 3 * GiB);
  assert_int_equal(gpum_fence_charge(f, 0, GiB, NULL), 0);
  assert_int_equal(gpum_fence_charge(f, 0, 1, NULL), GPUM_EDEVOOM);
  /* Devices are fenced apart: device 1 has its own 4 GiB. */
  assert_int_equal(gpum_fence_charge(f, 1, 4 * GiB, NULL), 0);
  assert_int_equal(gpum_fence_charge(f, GPUM_FENCE_MAX_DEVICES, 1, NULL), GPUM_ERANGE);
  assert_int_equal(used(f, 0), 4 * GiB);
  gpum_fence_uncharge(f, 0, 4 * GiB);
  gpum_fence_uncharge(f, 1, 4 * GiB);
  assert_int_equal(used(f, 0), 0);
  /* Giving back more than was charged takes nothing from anyone. */
  gpum_fence_uncharge(f, 0, GiB);
  assert_int_equal(gpum_fence_charge(f, 0, 4 * GiB, NULL), 0);
  assert_int_equal(gpum_fence_charge(f, 0, 1, NULL), GPUM_EDEVOOM);
  /* A raised limit lets more in; a lowered one stops charges until frees bring it under. */
  assert_int_equal(gpum_fence_set_limit(f, GPUM_FENCE_ALL_DEVICES, 5 * GiB), 0);
  assert_int_equal(gpum_fence_charge(f, 0, GiB, NULL), 0);
  assert_int_equal(gpum_fence_set_limit(f, 0, 2 * GiB), 0);
  assert_int_equal(gpum_fence_charge(f, 0, 1, NULL), GPUM_EDEVOOM);
  gpum_fence_uncharge(f, 0, 4 * GiB);
  assert_int_equal(gpum_fence_charge(f, 0, GiB, NULL), 0);
  assert_int_equal(gpum_fence_reservation(f), 7);
  assert_int_equal(gpum_fence_base_limit(f), 4 * GiB);
  drop(f);
}

static void test_open_errors(void **state) {
  (void)state;
  gpum_fence *f = make(GiB), *g = NULL;
  gpum_fence_opts_t o = {.limit = GiB};
  assert_int_equal(gpum_fence_create(name, &o, &g), GPUM_EEXIST);
  assert_int_equal(gpum_fence_open("gpum-test-fence-none", false, &g), GPUM_ENOENT);
  assert_int_equal(gpum_fence_open("a/b", false, &g), GPUM_EINVAL);
  o.limit = 0;
  assert_int_equal(gpum_fence_create("gpum-test-fence-zero", &o, &g), GPUM_EINVAL);
  /* A read-only handle reads but does not charge. */
  assert_int_equal(gpum_fence_charge(f, 0, 100, NULL), 0);
  assert_int_equal(gpum_fence_open(name, false, &g), 0);
  assert_int_equal(used(g, 0), 100);
  assert_int_equal(gpum_fence_charge(g, 0, 1, NULL), GPUM_EPERM);
  gpum_fence_close(g);
  char n1[GPUM_FENCE_NAME_MAX], n2[GPUM_FENCE_NAME_MAX], small[8];
  assert_int_equal(gpum_fence_name(n1, sizeof n1, "/var/lib/gpum/ledger.db", 12), 0);
  assert_int_equal(gpum_fence_name(n2, sizeof n2, "/tmp/other/ledger.db", 12), 0);
  assert_string_not_equal(n1, n2);
  assert_int_equal(gpum_fence_name(small, sizeof small, "/x", 1), GPUM_ENOSPC);
  drop(f);
}

/* A child charges child_bytes, says so on a pipe, and waits to be killed. */
static pid_t child_charging(gpum_fence *f, uint64_t child_bytes) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    char c = gpum_fence_charge(f, 0, child_bytes, NULL) == 0 ? 'y' : 'n';
    if (write(p[1], &c, 1) != 1)
      _exit(2);
    for (;;)
      pause();
  }
  close(p[1]);
  char c = 0;
  assert_int_equal(read(p[0], &c, 1), 1);
  close(p[0]);
  assert_int_equal(c, 'y');
  return pid;
}

static void test_processes_share_and_sigkill_gives_back(void **state) {
  (void)state;
  gpum_fence *f = make(4 * GiB);
  assert_int_equal(gpum_fence_charge(f, 0, GiB, NULL), 0);
  /* The child (its own slot after fork) takes 3 GiB of the shared 4. */
  pid_t pid = child_charging(f, 3 * GiB);
  gpum_fence_usage_t u;
  assert_int_equal(gpum_fence_usage(f, 0, &u), 0);
  assert_int_equal(u.used, 4 * GiB);
  assert_int_equal(u.procs, 2);
  assert_int_equal(gpum_fence_charge(f, 0, 1, NULL), GPUM_EDEVOOM);
  assert_int_equal(kill(pid, SIGKILL), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  /* Gone: its bytes stop counting at once, and the next charge that needs them gets them. */
  assert_int_equal(gpum_fence_usage(f, 0, &u), 0);
  assert_int_equal(u.used, GiB);
  assert_int_equal(u.procs, 1);
  assert_int_equal(gpum_fence_charge(f, 0, 3 * GiB, NULL), 0);
  assert_int_equal(gpum_fence_charge(f, 0, 1, NULL), GPUM_EDEVOOM);
  gpum_fence_uncharge(f, 0, 4 * GiB);
  assert_int_equal(used(f, 0), 0);
  drop(f);
}

static void test_reclaim_explicit(void **state) {
  (void)state;
  gpum_fence *f = make(4 * GiB);
  pid_t pid = child_charging(f, 2 * GiB);
  assert_int_equal(gpum_fence_reclaim(f), 0); /* alive: nothing to reclaim */
  assert_int_equal(kill(pid, SIGKILL), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_int_equal(gpum_fence_reclaim(f), 1);
  assert_int_equal(gpum_fence_reclaim(f), 0);
  assert_int_equal(gpum_fence_charge(f, 0, 4 * GiB, NULL), 0);
  drop(f);
}

#define THREADS 64
#define ROUNDS 2000
#define LIMIT (64ULL * 1024 * 1024)

static gpum_fence *shared;
static _Atomic int over; /* charges that found the fence past its limit */

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  uint64_t held[8] = {0};
  for (int i = 0; i < ROUNDS; i++) {
    unsigned k = (unsigned)rand_r(&seed) % 8;
    if (held[k]) {
      gpum_fence_uncharge(shared, 0, held[k]);
      held[k] = 0;
      continue;
    }
    uint64_t b = 1 + (uint64_t)rand_r(&seed) % (4 * 1024 * 1024), before;
    if (gpum_fence_charge(shared, 0, b, &before) == 0) {
      held[k] = b;
      if (before + b > LIMIT)
        over++;
    }
  }
  for (unsigned k = 0; k < 8; k++)
    gpum_fence_uncharge(shared, 0, held[k]);
  return NULL;
}

static void test_threads_never_pass_the_limit(void **state) {
  (void)state;
  shared = make(LIMIT);
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
  /* Meanwhile: what the fence holds never passes its limit. */
  for (int i = 0; i < 2000; i++) {
    gpum_fence_usage_t u;
    assert_int_equal(gpum_fence_usage(shared, 0, &u), 0);
    assert_true(u.used <= LIMIT);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  assert_int_equal(over, 0);
  assert_int_equal(used(shared, 0), 0);
  /* Back to zero: the whole limit is free again, to the byte. */
  assert_int_equal(gpum_fence_charge(shared, 0, LIMIT, NULL), 0);
  assert_int_equal(gpum_fence_charge(shared, 0, 1, NULL), GPUM_EDEVOOM);
  drop(shared);
}

/* Names end in 64 random bits: two for the same reservation differ, whatever the scope. */
static void test_names_cannot_be_guessed(void **state) {
  (void)state;
  char prefix[GPUM_FENCE_NAME_MAX], a[GPUM_FENCE_NAME_MAX], b[GPUM_FENCE_NAME_MAX];
  assert_int_equal(gpum_fence_prefix(prefix, sizeof prefix, "/run/gpum/gpumd.sock"), 0);
  assert_int_equal(gpum_fence_name(a, sizeof a, "/run/gpum/gpumd.sock", 12), 0);
  assert_int_equal(gpum_fence_name(b, sizeof b, "/run/gpum/gpumd.sock", 12), 0);
  assert_string_not_equal(a, b);
  size_t pl = strlen(prefix);
  assert_int_equal(strncmp(a, prefix, pl), 0);
  assert_int_equal(strncmp(a + pl, "12-", 3), 0);
  assert_int_equal(strlen(a + pl + 3), 16);
  assert_int_equal(strspn(a + pl + 3, "0123456789abcdef"), 16);
  /* The largest id still fits. */
  assert_int_equal(gpum_fence_name(a, sizeof a, "/x", UINT64_MAX), 0);
  assert_int_equal(gpum_fence_own_name(a, sizeof a), 0);
  assert_int_equal(gpum_fence_own_name(b, sizeof b), 0);
  assert_string_not_equal(a, b);
  assert_int_equal(strncmp(a, "gpum-fence-p", 12), 0);
}

/* What was at the name before (a symbolic link, a file of someone else) is never taken over or
 * followed, and stays as it was. */
static void test_create_never_takes_over(void **state) {
  (void)state;
  char link[128], target[128], file[128], n_link[GPUM_FENCE_NAME_MAX], n_file[GPUM_FENCE_NAME_MAX];
  snprintf(n_link, sizeof n_link, "gpum-test-fence-link-%d", (int)getpid());
  snprintf(n_file, sizeof n_file, "gpum-test-fence-file-%d", (int)getpid());
  snprintf(link, sizeof link, "/dev/shm/%s", n_link);
  snprintf(file, sizeof file, "/dev/shm/%s", n_file);
  snprintf(target, sizeof target, "/tmp/gpum-test-fence-target-%d", (int)getpid());
  unlink(target);
  assert_int_equal(symlink(target, link), 0);
  FILE *fp = fopen(file, "w");
  assert_non_null(fp);
  fputs("not a fence", fp);
  fclose(fp);
  gpum_fence *f = NULL;
  gpum_fence_opts_t o = {.limit = GiB};
  assert_int_equal(gpum_fence_create(n_link, &o, &f), GPUM_EEXIST);
  assert_int_equal(gpum_fence_create(n_file, &o, &f), GPUM_EEXIST);
  assert_int_equal(access(target, F_OK), -1); /* the link was not followed */
  assert_int_equal(gpum_fence_open(n_link, true, &f), GPUM_EPROTO);
  assert_int_equal(access(target, F_OK), -1);
  assert_int_equal(gpum_fence_open(n_file, true, &f), GPUM_EPROTO);
  struct stat st;
  assert_int_equal(stat(file, &st), 0);
  assert_int_equal(st.st_size, 11);
  unlink(link);
  unlink(file);
}

/* A region is its creator's alone (0600, whatever the umask), and is opened only when it
 * belongs to the uid expected. */
static void test_mode_and_owner(void **state) {
  (void)state;
  mode_t old = umask(0);
  gpum_fence *f = make(GiB), *g = NULL;
  umask(old);
  char path[128];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(gpum_fence_open_owned(name, false, geteuid() + 1, &g), GPUM_EPERM);
  assert_null(g);
  if (geteuid() == 0) { /* a region of another user is not ours to use */
    assert_int_equal(chown(path, 65534, (gid_t)-1), 0);
    assert_int_equal(gpum_fence_open(name, true, &g), GPUM_EPERM);
    assert_int_equal(gpum_fence_open_owned(name, false, 65534, &g), 0);
    gpum_fence_close(g);
  }
  drop(f);
}

/* The shim's own region of a job whose processes are all gone is swept; one whose creator runs
 * is kept, as is a region being made (no magic yet) by a process that runs. */
static void test_sweep_own(void **state) {
  (void)state;
  char dead[GPUM_FENCE_NAME_MAX], live[GPUM_FENCE_NAME_MAX];
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* creates a region, charges it, and dies without removing it */
    gpum_fence *f = NULL;
    gpum_fence_opts_t o = {.limit = GiB};
    if (gpum_fence_own_name(dead, sizeof dead) != 0 || gpum_fence_create(dead, &o, &f) != 0 ||
        gpum_fence_charge(f, 0, 1, NULL) != 0 || write(p[1], dead, sizeof dead) != sizeof dead)
      _exit(1);
    _exit(0);
  }
  close(p[1]);
  assert_int_equal(read(p[0], dead, sizeof dead), (ssize_t)sizeof dead);
  close(p[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  gpum_fence *mine = NULL, *g = NULL;
  gpum_fence_opts_t o = {.limit = GiB};
  assert_int_equal(gpum_fence_own_name(live, sizeof live), 0);
  assert_int_equal(gpum_fence_create(live, &o, &mine), 0);
  assert_false(gpum_fence_abandoned(mine));
  /* A gpumd of a test running beside this one may sweep it first: then it is gone already. */
  int rc = gpum_fence_open(dead, false, &g);
  if (rc == 0) {
    assert_true(gpum_fence_abandoned(g));
    gpum_fence_close(g);
  } else {
    assert_int_equal(rc, GPUM_ENOENT);
  }
  (void)gpum_fence_sweep_own();
  assert_int_equal(gpum_fence_open(dead, false, &g), GPUM_ENOENT);
  assert_int_equal(gpum_fence_open(live, false, &g), 0);
  gpum_fence_close(g);
  gpum_fence_close(mine);
  assert_int_equal(gpum_fence_unlink(live), 0);
}

/* A child marks flags on f, then exits; the parent waits for it. Returns the child's pid. */
static pid_t child_marking(gpum_fence *f, unsigned flags) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    gpum_fence_mark_used(f, flags);
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return pid;
}

static void test_used_flags(void **state) {
  (void)state;
  gpum_fence *f = make(GiB), *ro = NULL;
  assert_int_equal(gpum_fence_open(name, false, &ro), 0);
  int mpid = -1, ipid = -1;
  assert_int_equal(gpum_fence_used_flags(ro, &mpid, &ipid), 0);
  assert_int_equal(mpid, 0);
  assert_int_equal(ipid, 0);
  /* A read-only handle marks nothing; unknown bits are ignored. */
  gpum_fence_mark_used(ro, GPUM_FENCE_USED_ALL);
  gpum_fence_mark_used(f, 0x80u);
  gpum_fence_mark_used(NULL, GPUM_FENCE_USED_ALL);
  assert_int_equal(gpum_fence_used_flags(ro, NULL, NULL), 0);
  assert_int_equal(gpum_fence_used_flags(NULL, &mpid, &ipid), 0);
  /* One process of the job used managed memory: the reader sees it, and who. */
  pid_t first = child_marking(f, GPUM_FENCE_USED_MANAGED);
  assert_int_equal(gpum_fence_used_flags(ro, &mpid, &ipid), GPUM_FENCE_USED_MANAGED);
  assert_int_equal(mpid, first);
  assert_int_equal(ipid, 0);
  /* Another marks both: managed keeps its first user, IPC names the second. */
  gpum_fence_mark_used(f, GPUM_FENCE_USED_MANAGED | GPUM_FENCE_USED_IPC);
  assert_int_equal(gpum_fence_used_flags(ro, &mpid, &ipid), GPUM_FENCE_USED_ALL);
  assert_int_equal(mpid, first);
  assert_int_equal(ipid, getpid());
  (void)child_marking(f, GPUM_FENCE_USED_IPC);
  assert_int_equal(gpum_fence_used_flags(ro, &mpid, &ipid), GPUM_FENCE_USED_ALL);
  assert_int_equal(ipid, getpid());
  /* The flags are in the region, not the handle: a new handle sees them, with one pid NULL. */
  gpum_fence *again = NULL;
  assert_int_equal(gpum_fence_open(name, false, &again), 0);
  assert_int_equal(gpum_fence_used_flags(again, NULL, &ipid), GPUM_FENCE_USED_ALL);
  assert_int_equal(ipid, getpid());
  gpum_fence_close(again);
  gpum_fence_close(ro);
  drop(f);
}

/* Processes marking at once: the flag is set, and the pid kept is one of theirs. */
static void test_used_flags_race(void **state) {
  (void)state;
  enum { N = 8 };
  gpum_fence *f = make(GiB);
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t kids[N];
  for (int i = 0; i < N; i++) {
    kids[i] = fork();
    assert_true(kids[i] >= 0);
    if (kids[i] == 0) {
      close(go[1]);
      char c;
      /* Every child waits on the same pipe: closing it releases them together. */
      if (read(go[0], &c, 1) != 0)
        _exit(2);
      gpum_fence_mark_used(f, GPUM_FENCE_USED_IPC);
      _exit(0);
    }
  }
  close(go[0]);
  close(go[1]);
  for (int i = 0; i < N; i++) {
    int st;
    assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  int mpid = -1, ipid = -1;
  assert_int_equal(gpum_fence_used_flags(f, &mpid, &ipid), GPUM_FENCE_USED_IPC);
  assert_int_equal(mpid, 0);
  bool theirs = false;
  for (int i = 0; i < N; i++)
    theirs |= ipid == kids[i];
  assert_true(theirs);
  drop(f);
}

/* A region of another version (the shim and gpumd ship together) is refused, not misread. */
static void test_other_version_refused(void **state) {
  (void)state;
  gpum_fence *f = make(GiB), *g = NULL;
  char path[GPUM_FENCE_NAME_MAX + 16];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  assert_true(fd >= 0);
  uint32_t v = 2; /* the version field follows the 8-byte magic */
  assert_int_equal(pwrite(fd, &v, sizeof v, 8), (ssize_t)sizeof v);
  close(fd);
  assert_int_equal(gpum_fence_open(name, false, &g), GPUM_EPROTO);
  assert_null(g);
  drop(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_limit_to_the_byte),
      cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_processes_share_and_sigkill_gives_back),
      cmocka_unit_test(test_reclaim_explicit),
      cmocka_unit_test(test_names_cannot_be_guessed),
      cmocka_unit_test(test_create_never_takes_over),
      cmocka_unit_test(test_mode_and_owner),
      cmocka_unit_test(test_sweep_own),
      cmocka_unit_test(test_used_flags),
      cmocka_unit_test(test_used_flags_race),
      cmocka_unit_test(test_other_version_refused),
      cmocka_unit_test(test_threads_never_pass_the_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
