/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test's stand-in for a user database that answers slowly (an LDAP server away), which no
 * test can arrange: preloaded, a getpwnam_r or getpwnam of the name $GPUM_TEST_SLOW_NSS_NAME
 * first leaves a file entered.PID in the directory $GPUM_TEST_SLOW_NSS_DIR (so the test knows
 * which process is held), then waits until a file named "go" appears there (inotify: it
 * blocks, as a lookup of a server that does not answer does), and then answers as the real
 * call does. Every other name passes straight through.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* Blocks until $GPUM_TEST_SLOW_NSS_DIR/go exists, when name is the slow one. */
static void hold(const char *name) {
  const char *slow = getenv("GPUM_TEST_SLOW_NSS_NAME");
  const char *dir = getenv("GPUM_TEST_SLOW_NSS_DIR");
  if (!slow || !dir || !name || strcmp(name, slow) != 0)
    return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/entered.%ld", dir, (long)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0)
    close(fd);
  snprintf(path, sizeof path, "%s/go", dir);
  int in = inotify_init1(IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO) < 0) {
    if (in >= 0)
      close(in);
    return;
  }
  char buf[4096];
  while (access(path, F_OK) != 0) /* watched first, then checked: no creation is missed */
    if (read(in, buf, sizeof buf) <= 0)
      break;
  close(in);
}

int getpwnam_r(const char *name, struct passwd *pwd, char *buf, size_t len,
               struct passwd **result) {
  static int (*real)(const char *, struct passwd *, char *, size_t, struct passwd **);
  if (!real) {
    void *p = dlsym(RTLD_NEXT, "getpwnam_r");
    memcpy(&real, &p, sizeof real);
  }
  hold(name);
  return real(name, pwd, buf, len, result);
}

struct passwd *getpwnam(const char *name) {
  static struct passwd *(*real)(const char *);
  if (!real) {
    void *p = dlsym(RTLD_NEXT, "getpwnam");
    memcpy(&real, &p, sizeof real);
  }
  hold(name);
  return real(name);
}
