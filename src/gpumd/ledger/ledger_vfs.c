/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's VFS (see ledger_internal.h): SQLite's own for the platform ("unix"), with the
 * log frames of a commit written in one system call instead of two per page.
 *
 * SQLite writes each frame of the write-ahead log with two write calls, its 24-byte header and
 * then the page, at the end of the log; a commit of twelve pages is 24 pwrite calls, and on
 * gpumd's writer thread they were most of its system time per request. Here those appends are
 * gathered while they follow each other in that pattern, and written together:
 * - when a commit frame's page has been added (the frame header's bytes 4-7, the database size
 *   after the commit, are not zero for a commit frame and zero for any other: the WAL file
 *   format, https://www.sqlite.org/fileformat2.html#walformat). SQLite makes a commit visible
 *   to readers in the shared-memory index only after it has written that frame, so no reader,
 *   in this process or another (`sqlite3 .backup`, the checkpointer), ever finds a frame the
 *   index names missing from the file; a failed write fails that write call, and so the commit;
 * - before any other use of the log by this connection: a read (a page spilled from the cache
 *   and read back within the transaction), a sync, its size, a truncation, a file control, a
 *   close, or a write that does not continue the gathered bytes.
 * Writes of any other shape (a header and page in one call, should SQLite ever write them so)
 * go straight through after what is gathered, as without this layer. Nothing else changes: the
 * database file, the shared-memory index and the locks are the underlying VFS's own.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "ledger_internal.h"

#define FRAME_HDR 24 /* a WAL frame header (the file format) */
/* Bytes gathered at most before they are written: the unix VFS writes less than 128 KiB in
 * one call (it masks a larger size to 17 bits, and a larger write fails as SQLITE_FULL). */
#define GATHER_MAX (64u * 1024u)

typedef struct {
  sqlite3_file base;  /* pMethods: methods_wal, or the underlying file's own for others */
  sqlite3_file *real; /* the underlying VFS's file, after this struct */
  bool wal;
  bool page_next;   /* the last gathered write was a frame header: the page comes next */
  bool commit_page; /* ... of a commit frame */
  char *buf;        /* gathered bytes, from offset at */
  size_t len, cap;
  sqlite3_int64 at;
} lfile_t;

/* Set once by gpumd__ledger_vfs_register, read-only after. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sqlite3_vfs *under; /* the underlying VFS */
static sqlite3_vfs vfs;
static sqlite3_io_methods methods_wal, methods_other;

static lfile_t *lf(sqlite3_file *f) {
  return (lfile_t *)f;
}

/* Writes the gathered bytes. */
static int flush(lfile_t *f) {
  if (f->len == 0)
    return SQLITE_OK;
  int rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->at);
  f->len = 0;
  f->page_next = f->commit_page = false;
  return rc;
}

/* Adds n bytes at off to the gathered ones; false when there is no room (nothing added). */
static bool gather(lfile_t *f, const void *p, size_t n, sqlite3_int64 off) {
  if (f->len > 0 && off != f->at + (sqlite3_int64)f->len)
    return false;
  if (f->len + n > f->cap) {
    if (f->len + n > GATHER_MAX)
      return false;
    size_t cap = f->cap ? f->cap : 16384;
    while (cap < f->len + n)
      cap *= 2;
    char *b = realloc(f->buf, cap);
    if (!b)
      return false;
    f->buf = b;
    f->cap = cap;
  }
  if (f->len == 0)
    f->at = off;
  memcpy(f->buf + f->len, p, n);
  f->len += n;
  return true;
}

static int wal_write(sqlite3_file *file, const void *p, int n, sqlite3_int64 off) {
  lfile_t *f = lf(file);
  const unsigned char *b = p;
  if (n == FRAME_HDR && !f->page_next) { /* a frame header: its page follows */
    bool commit = (b[4] | b[5] | b[6] | b[7]) != 0;
    if (gather(f, p, (size_t)n, off)) {
      f->page_next = true;
      f->commit_page = commit;
      return SQLITE_OK;
    }
  } else if (f->page_next && n > 0) { /* the page of the frame whose header was gathered */
    bool commit = f->commit_page;
    if (gather(f, p, (size_t)n, off)) {
      f->page_next = false;
      return commit ? flush(f) : SQLITE_OK;
    }
  }
  /* Any other write: after what is gathered, straight through. */
  int rc = flush(f);
  if (rc != SQLITE_OK)
    return rc;
  return f->real->pMethods->xWrite(f->real, p, n, off);
}

static int wal_close(sqlite3_file *file) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  int crc = f->real->pMethods->xClose(f->real);
  free(f->buf);
  f->buf = NULL;
  f->cap = 0;
  return rc != SQLITE_OK ? rc : crc;
}

static int wal_read(sqlite3_file *file, void *p, int n, sqlite3_int64 off) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, p, n, off);
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wal_sync(sqlite3_file *file, int flags) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wal_size(sqlite3_file *file, sqlite3_int64 *size) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int wal_fcntl(sqlite3_file *file, int op, void *arg) {
  lfile_t *f = lf(file);
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

/* The rest of a log's methods, and every method of the other files, go to the underlying
 * file as they are. */
#define PASS(name, args, call)                  \
  static int pass_##name args {                 \
    return lf(file)->real->pMethods->name call; \
  }
PASS(xClose, (sqlite3_file * file), (lf(file)->real))
PASS(xRead, (sqlite3_file * file, void *p, int n, sqlite3_int64 off), (lf(file)->real, p, n, off))
PASS(xWrite, (sqlite3_file * file, const void *p, int n, sqlite3_int64 off),
     (lf(file)->real, p, n, off))
PASS(xTruncate, (sqlite3_file * file, sqlite3_int64 size), (lf(file)->real, size))
PASS(xSync, (sqlite3_file * file, int flags), (lf(file)->real, flags))
PASS(xFileSize, (sqlite3_file * file, sqlite3_int64 *size), (lf(file)->real, size))
PASS(xLock, (sqlite3_file * file, int l), (lf(file)->real, l))
PASS(xUnlock, (sqlite3_file * file, int l), (lf(file)->real, l))
PASS(xCheckReservedLock, (sqlite3_file * file, int *out), (lf(file)->real, out))
PASS(xFileControl, (sqlite3_file * file, int op, void *arg), (lf(file)->real, op, arg))
PASS(xSectorSize, (sqlite3_file * file), (lf(file)->real))
PASS(xDeviceCharacteristics, (sqlite3_file * file), (lf(file)->real))
PASS(xShmMap, (sqlite3_file * file, int pg, int sz, int extend, void volatile **pp),
     (lf(file)->real, pg, sz, extend, pp))
PASS(xShmLock, (sqlite3_file * file, int off, int n, int flags), (lf(file)->real, off, n, flags))
PASS(xShmUnmap, (sqlite3_file * file, int del), (lf(file)->real, del))
PASS(xFetch, (sqlite3_file * file, sqlite3_int64 off, int n, void **pp),
     (lf(file)->real, off, n, pp))
PASS(xUnfetch, (sqlite3_file * file, sqlite3_int64 off, void *p), (lf(file)->real, off, p))
#undef PASS

static void pass_xShmBarrier(sqlite3_file *file) {
  lf(file)->real->pMethods->xShmBarrier(lf(file)->real);
}

/* The methods of a file of ours, version 3 as the underlying files' must be. */
static void methods_init(sqlite3_io_methods *m, bool wal) {
  *m = (sqlite3_io_methods){
      .iVersion = 3,
      .xClose = wal ? wal_close : pass_xClose,
      .xRead = wal ? wal_read : pass_xRead,
      .xWrite = wal ? wal_write : pass_xWrite,
      .xTruncate = wal ? wal_truncate : pass_xTruncate,
      .xSync = wal ? wal_sync : pass_xSync,
      .xFileSize = wal ? wal_size : pass_xFileSize,
      .xLock = pass_xLock,
      .xUnlock = pass_xUnlock,
      .xCheckReservedLock = pass_xCheckReservedLock,
      .xFileControl = wal ? wal_fcntl : pass_xFileControl,
      .xSectorSize = pass_xSectorSize,
      .xDeviceCharacteristics = pass_xDeviceCharacteristics,
      .xShmMap = pass_xShmMap,
      .xShmLock = pass_xShmLock,
      .xShmBarrier = pass_xShmBarrier,
      .xShmUnmap = pass_xShmUnmap,
      .xFetch = pass_xFetch,
      .xUnfetch = pass_xUnfetch,
  };
}

static int v_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *file, int flags,
                  int *out_flags) {
  (void)v;
  lfile_t *f = lf(file);
  memset(f, 0, sizeof *f);
  f->real = (sqlite3_file *)(f + 1);
  int rc = under->xOpen(under, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || f->real->pMethods == NULL)
    return rc;                           /* nothing to close: base.pMethods stays NULL */
  if (f->real->pMethods->iVersion < 3) { /* methods ours would call and it lacks */
    f->real->pMethods->xClose(f->real);
    return SQLITE_CANTOPEN;
  }
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->base.pMethods = f->wal ? &methods_wal : &methods_other;
  return SQLITE_OK;
}

/* The VFS's other methods are the underlying one's. */
static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
  (void)v;
  return under->xDelete(under, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return under->xAccess(under, name, flags, out);
}
static int v_fullpath(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return under->xFullPathname(under, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return under->xDlOpen(under, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  under->xDlError(under, n, out);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
  (void)v;
  return under->xDlSym(under, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
  (void)v;
  under->xDlClose(under, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return under->xRandomness(under, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return under->xSleep(under, us);
}
static int v_time(sqlite3_vfs *v, double *out) {
  (void)v;
  return under->xCurrentTime(under, out);
}
static int v_lasterror(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return under->xGetLastError ? under->xGetLastError(under, n, out) : 0;
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return under->xCurrentTimeInt64(under, out);
}

const char *gpumd__ledger_vfs_register(const char *underlying) {
  pthread_mutex_lock(&reg_lock);
  if (vfs.zName != NULL || (under = sqlite3_vfs_find(underlying)) == NULL || under->iVersion < 2) {
    const char *name = vfs.zName;
    pthread_mutex_unlock(&reg_lock);
    return name;
  }
  methods_init(&methods_wal, true);
  methods_init(&methods_other, false);
  vfs = (sqlite3_vfs){
      .iVersion = 2,
      .szOsFile = (int)sizeof(lfile_t) + under->szOsFile,
      .mxPathname = under->mxPathname,
      .zName = GPUMD_LEDGER_VFS,
      .xOpen = v_open,
      .xDelete = v_delete,
      .xAccess = v_access,
      .xFullPathname = v_fullpath,
      .xDlOpen = v_dlopen,
      .xDlError = v_dlerror,
      .xDlSym = v_dlsym,
      .xDlClose = v_dlclose,
      .xRandomness = v_random,
      .xSleep = v_sleep,
      .xCurrentTime = v_time,
      .xGetLastError = v_lasterror,
      .xCurrentTimeInt64 = v_time64,
  };
  if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK)
    vfs.zName = NULL;
  const char *name = vfs.zName;
  pthread_mutex_unlock(&reg_lock);
  return name;
}
