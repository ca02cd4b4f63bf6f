/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory fences of gpumd's reservations: finding them without trusting a name, and
 * removing them when their reservation ends (fences_internal.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "fences_internal.h"
#include "engine.h"
#include "gpumd.h"
#include "sched.h"

#define SHM_DIR "/dev/shm"

typedef struct {
  uint64_t id;
  uid_t uid; /* the file's owner */
  char name[GPUM_FENCE_NAME_MAX];
} entry_t;

typedef struct {
  uint64_t id;
  uid_t uid;
} ended_t;

struct gpumd_fences {
  char prefix[GPUM_FENCE_NAME_MAX]; /* of this gpumd's regions */
  size_t prefix_len;
  int inotify;   /* -1: none, list every time */
  bool dirty;    /* the listing is stale */
  bool unswept;  /* regions came or went since the last sweep */
  entry_t *list; /* this gpumd's regions as last listed */
  size_t n, cap;
  ended_t *ended; /* reservations ended this turn, their regions removed at its end */
  size_t nended, capended;
  struct event *timer;
};

/* Reads the queued inotify events; true when one concerns a fence region (or was lost). */
static bool drain(struct gpumd_fences *f) {
  bool changed = false;
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(f->inotify, buf, sizeof buf);
    if (n <= 0)
      return changed || (n < 0 && errno != EAGAIN && errno != EINTR);
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      if ((e->mask & IN_Q_OVERFLOW) || (e->len && !strncmp(e->name, "gpum-fence-", 11)))
        changed = true;
      p += sizeof *e + e->len;
    }
  }
}

/* Lists this gpumd's regions again when something changed since the last listing. */
static void refresh(struct gpumd_fences *f) {
  if (f->inotify >= 0 && drain(f))
    f->dirty = true;
  if (!f->dirty && f->inotify >= 0)
    return;
  f->dirty = false; /* events from now on mark it again: drained before the listing */
  f->unswept = true;
  f->n = 0;
  DIR *dir = opendir(SHM_DIR);
  if (!dir)
    return;
  struct dirent *de;
  while ((de = readdir(dir)) != NULL) {
    if (strncmp(de->d_name, f->prefix, f->prefix_len) != 0 ||
        strlen(de->d_name) >= GPUM_FENCE_NAME_MAX)
      continue;
    char *end = NULL;
    unsigned long long id = strtoull(de->d_name + f->prefix_len, &end, 10);
    struct stat st;
    if (!end || *end != '-' || id == 0 ||
        fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (f->n == f->cap) {
      size_t cap = f->cap ? f->cap * 2 : 16;
      entry_t *p = realloc(f->list, cap * sizeof *p);
      if (!p)
        break;
      f->list = p;
      f->cap = cap;
    }
    entry_t *e = &f->list[f->n++];
    e->id = id;
    e->uid = st.st_uid;
    memcpy(e->name, de->d_name, strlen(de->d_name) + 1);
  }
  closedir(dir);
}

static struct gpumd_fences *fences_of(struct gpumd *d) {
  struct gpumd_fences *f = d->fences;
  if (f)
    refresh(f);
  return f;
}

/* Whether r ended this turn (its regions go at the turn's end). */
static bool ended_now(const struct gpumd_fences *f, const gpumd_resv_t *r) {
  for (size_t i = 0; i < f->nended; i++)
    if (f->ended[i].id == r->id)
      return true;
  return false;
}

gpum_fence *gpumd_fences_open(struct gpumd *d, const gpumd_resv_t *r) {
  if (d->fences && ended_now(d->fences, r))
    return NULL; /* its regions are as good as gone */
  struct gpumd_fences *f = fences_of(d);
  for (size_t i = 0; f && i < f->n; i++) {
    gpum_fence *h = NULL;
    if (f->list[i].id != r->id || f->list[i].uid != r->uid)
      continue;
    if (gpum_fence_open_owned(f->list[i].name, false, r->uid, &h) == 0 &&
        gpum_fence_reservation(h) == r->id)
      return h;
    gpum_fence_close(h);
    gpum_error_clear();
  }
  return NULL;
}

/* Removes entry i's region and forgets it. */
static bool remove_at(struct gpumd_fences *f, size_t i, const char *why) {
  bool gone = gpum_fence_unlink(f->list[i].name) == 0;
  if (gone)
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "fence %s removed: %s", f->list[i].name, why);
  else
    gpum_log(GPUM_LOG_WARN, "gpumd", "cannot remove fence %s (%s): %s", f->list[i].name, why,
             gpum_last_error());
  gpum_error_clear();
  f->list[i] = f->list[--f->n];
  return gone;
}

/* Removes the regions of reservation id owned by uid (listing fresh). */
static void remove_ended(struct gpumd_fences *f, uint64_t id, uid_t uid) {
  for (size_t i = 0; i < f->n;) {
    /* Only the owner's: a file another user made under this name is not this reservation's. */
    if (f->list[i].id == id && f->list[i].uid == uid)
      remove_at(f, i, "its reservation ended");
    else
      i++;
  }
}

void gpumd_fences_ended(struct gpumd *d, const gpumd_resv_t *r) {
  struct gpumd_fences *f = d->fences;
  if (!f)
    return;
  if (f->nended == f->capended) {
    size_t cap = f->capended ? f->capended * 2 : 16;
    ended_t *p = realloc(f->ended, cap * sizeof *p);
    if (!p) { /* out of memory: at once, as the turn's end would */
      refresh(f);
      remove_ended(f, r->id, r->uid);
      return;
    }
    f->ended = p;
    f->capended = cap;
  }
  f->ended[f->nended++] = (ended_t){r->id, r->uid};
}

void gpumd_fences_end_turn(struct gpumd *d) {
  struct gpumd_fences *f = d->fences;
  if (!f || f->nended == 0)
    return;
  refresh(f); /* after every read of the turn: a region made before a request is listed */
  for (size_t i = 0; i < f->nended; i++)
    remove_ended(f, f->ended[i].id, f->ended[i].uid);
  f->nended = 0;
}

unsigned gpumd_fences_sweep(struct gpumd *d) {
  struct gpumd_fences *f = fences_of(d);
  unsigned removed = 0;
  uint64_t next = d->sched ? gpumd_sched_next_id(d->sched) : 0;
  for (size_t i = 0; f && i < f->n;) {
    const gpumd_resv_t *r = d->sched ? gpumd_sched_find(d->sched, f->list[i].id) : NULL;
    /* Ids not issued yet are no reservation's: whatever made them, nothing of ours. */
    bool stale = f->list[i].id < next && (!r || gpumd_resv_state_final(r->state));
    if (stale)
      removed += remove_at(f, i, "its reservation is not live");
    else
      i++;
  }
  removed += gpum_fence_sweep_own();
  gpum_error_clear();
  if (f)
    f->unswept = false;
  return removed;
}

static void on_timer(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  struct gpumd *d = arg;
  struct gpumd_fences *f = d->fences;
  if (f->inotify >= 0 && drain(f))
    f->dirty = true;
  if (f->inotify < 0 || f->dirty || f->unswept)
    gpumd_fences_sweep(d);
}

int gpumd_fences_start(struct gpumd *d) {
  struct gpumd_fences *f = calloc(1, sizeof *f);
  if (!f)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  int rc = gpum_fence_prefix(f->prefix, sizeof f->prefix, d->socket_path);
  if (rc != 0) {
    free(f);
    return rc;
  }
  f->prefix_len = strlen(f->prefix);
  f->dirty = true;
  f->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (f->inotify >= 0 &&
      inotify_add_watch(f->inotify, SHM_DIR, IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) <
          0) {
    close(f->inotify);
    f->inotify = -1;
  }
  if (f->inotify < 0)
    gpum_log(GPUM_LOG_INFO, "gpumd", "no inotify on %s (%s): fences are looked up by listing it",
             SHM_DIR, strerror(errno));
  f->timer = event_new(d->base, -1, EV_PERSIST, on_timer, d);
  if (!f->timer) {
    if (f->inotify >= 0)
      close(f->inotify);
    free(f);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  struct timeval tv = {.tv_sec = GPUMD_FENCES_SWEEP_S, .tv_usec = 0};
  event_add(f->timer, &tv);
  d->fences = f;
  unsigned n = gpumd_fences_sweep(d);
  if (n)
    gpum_log(GPUM_LOG_INFO, "gpumd", "removed %u fence regions of ended reservations", n);
  return 0;
}

void gpumd_fences_stop(struct gpumd *d) {
  struct gpumd_fences *f = d->fences;
  if (!f)
    return;
  event_free(f->timer);
  if (f->inotify >= 0)
    close(f->inotify);
  free(f->list);
  free(f->ended);
  free(f);
  d->fences = NULL;
}
