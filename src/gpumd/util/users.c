/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The uid -> user name cache (users.h): a small table under a mutex, filled by a resolver
 * thread that does the one call that may block (getpwuid_r, which may go to LDAP or SSSD). The
 * loop only reads the table and queues the uids it has not seen.
 */
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include "users.h"
#include "utf8_internal.h"

typedef enum { ENTRY_PENDING = 1, ENTRY_NAMED, ENTRY_NONAME } entry_state_t;

typedef struct {
  unsigned uid;
  entry_state_t state; /* 0: a free slot */
  uint64_t used;       /* when last asked for (a counter): the least recent makes room */
  char name[GPUMD_USER_BUFSZ];
} entry_t;

struct gpumd_users {
  pthread_mutex_t mu;
  pthread_cond_t work; /* a uid was queued, or stop */
  pthread_cond_t done; /* a uid was resolved */
  bool stop;
  int refs; /* the owner and the resolver thread: the last one frees */
  uint64_t clock;
  size_t cap;
  entry_t *entries;
};

static void destroy(gpumd_users_t *u) {
  pthread_cond_destroy(&u->work);
  pthread_cond_destroy(&u->done);
  pthread_mutex_destroy(&u->mu);
  free(u->entries);
  free(u);
}

/* Drops one reference (locked by the caller, unlocked here); frees u on the last. */
static void unref_unlock(gpumd_users_t *u) {
  bool last = --u->refs == 0;
  pthread_mutex_unlock(&u->mu);
  if (last)
    destroy(u);
}

/* getpwuid_r of uid: its name into name, or "" when it has none (or the lookup failed). */
static void lookup(unsigned uid, char name[GPUMD_USER_BUFSZ]) {
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  size_t len = hint > 0 ? (size_t)hint : 4096;
  name[0] = '\0';
  for (int tries = 0; tries < 6; tries++, len *= 2) {
    char *buf = malloc(len);
    if (!buf)
      return;
    struct passwd pw, *res = NULL;
    int rc = getpwuid_r((uid_t)uid, &pw, buf, len, &res);
    if (rc == 0 && res && res->pw_name) /* valid UTF-8: a JSON string holds it */
      gpumd_utf8_clean(res->pw_name, name, GPUMD_USER_BUFSZ);
    free(buf);
    if (rc != ERANGE)
      return;
  }
}

static entry_t *pending(gpumd_users_t *u) {
  for (size_t i = 0; i < u->cap; i++)
    if (u->entries[i].state == ENTRY_PENDING)
      return &u->entries[i];
  return NULL;
}

static void *resolver(void *arg) {
  gpumd_users_t *u = arg;
  pthread_mutex_lock(&u->mu);
  for (;;) {
    entry_t *e;
    while (!u->stop && !(e = pending(u)))
      pthread_cond_wait(&u->work, &u->mu);
    if (u->stop)
      break;
    unsigned uid = e->uid; /* a pending entry is never evicted: e stays this uid's */
    pthread_mutex_unlock(&u->mu);
    char name[GPUMD_USER_BUFSZ];
    lookup(uid, name);
    pthread_mutex_lock(&u->mu);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->state = name[0] ? ENTRY_NAMED : ENTRY_NONAME;
    pthread_cond_broadcast(&u->done);
  }
  unref_unlock(u);
  return NULL;
}

int gpumd_users_new(size_t cap, gpumd_users_t **out) {
  *out = NULL;
  gpumd_users_t *u = calloc(1, sizeof *u);
  if (!u || !(u->entries = calloc(cap ? cap : 1, sizeof *u->entries))) {
    free(u);
    return gpum_error(GPUM_ENOMEM, "out of memory for the user name cache");
  }
  u->cap = cap ? cap : 1;
  u->refs = 2;
  pthread_mutex_init(&u->mu, NULL);
  pthread_cond_init(&u->work, NULL);
  pthread_cond_init(&u->done, NULL);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, resolver, u);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    destroy(u);
    return gpum_error(GPUM_EINTERNAL, "cannot start the user name resolver: %s", strerror(rc));
  }
  *out = u;
  return 0;
}

void gpumd_users_free(gpumd_users_t *u) {
  if (!u)
    return;
  pthread_mutex_lock(&u->mu);
  u->stop = true;
  pthread_cond_signal(&u->work);
  unref_unlock(u);
}

bool gpumd_users_name(gpumd_users_t *u, unsigned uid, char *buf) {
  buf[0] = '\0';
  if (!u)
    return false;
  pthread_mutex_lock(&u->mu);
  entry_t *e = NULL, *room = NULL;
  /* room: a free slot, else the least recently asked for that is not waiting for the
   * resolver (linear: the table is small, and asked for a few processes a status). */
  for (size_t i = 0; i < u->cap && !e; i++) {
    entry_t *x = &u->entries[i];
    if (x->state && x->uid == uid)
      e = x;
    else if (!x->state
                 ? !room || room->state
                 : x->state != ENTRY_PENDING && (!room || (room->state && x->used < room->used)))
      room = x;
  }
  if (!e && room) { /* queued: shown as a number until the resolver names it */
    e = room;
    memset(e, 0, sizeof *e);
    e->uid = uid;
    e->state = ENTRY_PENDING;
    pthread_cond_signal(&u->work);
  }
  bool named = e && e->state == ENTRY_NAMED;
  if (e)
    e->used = ++u->clock;
  if (named)
    snprintf(buf, GPUMD_USER_BUFSZ, "%s", e->name);
  pthread_mutex_unlock(&u->mu);
  return named;
}

void gpumd_users_wait(gpumd_users_t *u) {
  pthread_mutex_lock(&u->mu);
  while (pending(u))
    pthread_cond_wait(&u->done, &u->mu);
  pthread_mutex_unlock(&u->mu);
}
