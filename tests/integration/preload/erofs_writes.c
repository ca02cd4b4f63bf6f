/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test's stand-in for a file system that goes read-only under a running program (an ext4
 * remounted read-only after an error), which no unprivileged test can cause: preloaded, it
 * makes every write, sync and resize of a file under $GPUM_TEST_EROFS_DIR fail with EROFS
 * from the moment the file $GPUM_TEST_EROFS_FLAG exists, as the kernel then does, and statvfs
 * reports the directory's file system as mounted read-only (ST_RDONLY). Everything else passes
 * through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

/* Whether path is the dir or under it while the flag file exists. */
static int read_only_now(const char *path) {
  const char *flag = getenv("GPUM_TEST_EROFS_FLAG");
  const char *dir = getenv("GPUM_TEST_EROFS_DIR");
  if (!flag || !dir || !*dir || access(flag, F_OK) != 0)
    return 0;
  size_t len = strlen(dir);
  return strncmp(path, dir, len) == 0 && (path[len] == '/' || path[len] == '\0');
}

/* Whether a write to fd must fail: fd is a file under the dir while the flag file exists. */
static int refused(int fd) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0)
    return 0;
  target[n] = '\0';
  return read_only_now(target);
}

int statvfs(const char *path, struct statvfs *out) {
  static int (*real)(const char *, struct statvfs *);
  if (!real) {
    void *p = dlsym(RTLD_NEXT, "statvfs");
    memcpy(&real, &p, sizeof real);
  }
  int rc = real(path, out);
  if (rc == 0 && read_only_now(path))
    out->f_flag |= ST_RDONLY;
  return rc;
}

/* Defines NAME(PROTO) that fails with EROFS for a refused fd, else calls the real one. */
#define REFUSE(name, ret, proto, args)   \
  ret name proto {                       \
    static ret(*real) proto;             \
    if (!real) {                         \
      void *p = dlsym(RTLD_NEXT, #name); \
      memcpy(&real, &p, sizeof real);    \
    }                                    \
    if (refused(fd)) {                   \
      errno = EROFS;                     \
      return -1;                         \
    }                                    \
    return real args;                    \
  }

REFUSE(write, ssize_t, (int fd, const void *buf, size_t n), (fd, buf, n))
REFUSE(pwrite, ssize_t, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))
REFUSE(pwrite64, ssize_t, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))
REFUSE(fsync, int, (int fd), (fd))
REFUSE(fdatasync, int, (int fd), (fd))
REFUSE(ftruncate, int, (int fd, off_t len), (fd, len))
REFUSE(ftruncate64, int, (int fd, off_t len), (fd, len))
REFUSE(fallocate, int, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len))
REFUSE(fallocate64, int, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len))
