/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum slurm conf --install DIR`: writes the node's gres.conf into Slurm's configuration
 * directory and adds the plugin's line to its plugstack.conf (gpum/slurm.h). slurm.conf is never
 * written: its lines are printed for the administrator to add.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/slurm.h>

#ifndef GPUM_INSTALL_LIBDIR
#define GPUM_INSTALL_LIBDIR "/usr/local/lib"
#endif

const char *gpum_slurm_plugin_path(void) {
  return GPUM_INSTALL_LIBDIR "/gpum/gpum_spank.so";
}

/* The whole of file path, malloc'd, in *text (NULL when it does not exist). */
static int read_all(const char *path, char **text) {
  *text = NULL;
  FILE *f = fopen(path, "r");
  if (!f)
    return errno == ENOENT ? 0 : gpum_error(GPUM_EIO, "cannot read %s: %s", path, strerror(errno));
  size_t len = 0, cap = 4096;
  char *s = malloc(cap);
  size_t k;
  while (s && (k = fread(s + len, 1, cap - len - 1, f)) > 0) {
    len += k;
    if (len + 1 == cap) {
      char *n = cap < (64u << 20) ? realloc(s, cap * 2) : NULL;
      if (!n) {
        free(s);
        s = NULL;
      }
      s = n;
      cap *= 2;
    }
  }
  bool err = ferror(f) != 0;
  fclose(f);
  if (!s)
    return gpum_error(GPUM_ENOMEM, "%s is too large to read", path);
  if (err) {
    free(s);
    return gpum_error(GPUM_EIO, "cannot read %s", path);
  }
  s[len] = '\0';
  *text = s;
  return 0;
}

/* Writes text to path through a temporary file renamed over it (mode 0644). */
static int write_all(const char *path, const char *text) {
  char tmp[4200];
  int w = snprintf(tmp, sizeof tmp, "%s.gpum-tmp", path);
  if (w < 0 || (size_t)w >= sizeof tmp)
    return gpum_error(GPUM_EINVAL, "the path %s is too long", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot write %s: %s", tmp, strerror(errno));
  size_t len = strlen(text), off = 0;
  while (off < len) {
    ssize_t k = write(fd, text + off, len - off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      int e = errno;
      close(fd);
      unlink(tmp);
      return gpum_error(GPUM_EIO, "cannot write %s: %s", tmp, strerror(e));
    }
    off += (size_t)k;
  }
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0 || close(fd) != 0) {
    int e = errno;
    unlink(tmp);
    return gpum_error(GPUM_EIO, "cannot write %s: %s", tmp, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return gpum_error(GPUM_EIO, "cannot write %s: %s", path, strerror(e));
  }
  return 0;
}

/* Whether a line of text that is not a comment names gpum_spank.so. */
static bool names_plugin(const char *text) {
  for (const char *l = text; l && *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    const char *p = l;
    while (p < l + len && (*p == ' ' || *p == '\t'))
      p++;
    if (p < l + len && *p != '#') {
      for (const char *q = p; q + 13 <= l + len; q++)
        if (strncmp(q, "gpum_spank.so", 13) == 0)
          return true;
    }
    l = end ? end + 1 : NULL;
  }
  return false;
}

typedef struct {
  char *s;
  size_t len, cap;
} buf_t;

__attribute__((format(printf, 2, 3))) static void say(buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char line[8400];
  int k = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (k < 0 || !b->s)
    return;
  size_t n = (size_t)k < sizeof line ? (size_t)k : sizeof line - 1;
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->len + n + 1) * 2;
    char *s = realloc(b->s, cap);
    if (!s) {
      free(b->s);
      b->s = NULL;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->len, line, n);
  b->len += n;
  b->s[b->len] = '\0';
}

int gpum_slurm_install(const char *dir, const char *gres_conf, const char *plugin, char **report) {
  if (report)
    *report = NULL;
  if (!dir || !gres_conf || !report)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_install: NULL argument");
  if (!plugin || !*plugin)
    plugin = gpum_slurm_plugin_path();
  if (strchr(plugin, '\n') || strstr(plugin, "gpum_spank.so") == NULL)
    return gpum_error(GPUM_EINVAL, "'%s' is not a path to gpum_spank.so (with arguments)", plugin);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return gpum_error(GPUM_ENOENT, "%s is not a directory (Slurm's is /etc/slurm)", dir);
  char gres_path[4096], old_path[4096], plug_path[4096];
  const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
  int w1 = snprintf(gres_path, sizeof gres_path, "%s%sgres.conf", dir, sep);
  int w2 = snprintf(old_path, sizeof old_path, "%s%sgres.conf.old", dir, sep);
  int w3 = snprintf(plug_path, sizeof plug_path, "%s%splugstack.conf", dir, sep);
  if (w1 < 0 || w2 < 0 || w3 < 0 || (size_t)w2 >= sizeof old_path || (size_t)w3 >= sizeof plug_path)
    return gpum_error(GPUM_EINVAL, "the directory %s is too long", dir);
  buf_t b = {malloc(256), 0, 256};
  if (b.s)
    b.s[0] = '\0';
  char *old = NULL;
  int rc = read_all(gres_path, &old);
  if (rc != 0)
    goto out;
  if (old && strcmp(old, gres_conf) == 0) {
    say(&b, "%s: unchanged (it holds these lines already)\n", gres_path);
  } else {
    if (old && rename(gres_path, old_path) != 0) {
      rc = gpum_error(GPUM_EIO, "cannot keep the old %s as %s: %s", gres_path, old_path,
                      strerror(errno));
      goto out;
    }
    if ((rc = write_all(gres_path, gres_conf)) != 0)
      goto out;
    if (old)
      say(&b, "%s: written (the one it replaces is %s)\n", gres_path, old_path);
    else
      say(&b, "%s: written\n", gres_path);
  }
  free(old);
  old = NULL;
  if ((rc = read_all(plug_path, &old)) != 0)
    goto out;
  if (old && names_plugin(old)) {
    say(&b, "%s: unchanged (it names gpum_spank.so already)\n", plug_path);
  } else {
    size_t olen = old ? strlen(old) : 0;
    size_t need = olen + strlen(plugin) + 16;
    char *text = malloc(need);
    if (!text) {
      rc = gpum_error(GPUM_ENOMEM, "out of memory");
      goto out;
    }
    snprintf(text, need, "%s%srequired %s\n", old ? old : "",
             olen && old[olen - 1] != '\n' ? "\n" : "", plugin);
    rc = write_all(plug_path, text);
    free(text);
    if (rc != 0)
      goto out;
    say(&b, "%s: %s 'required %s'\n", plug_path, old ? "added" : "written with", plugin);
  }
  if (!b.s) {
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
    goto out;
  }
  *report = b.s;
  b.s = NULL;
out:
  free(old);
  free(b.s);
  return rc;
}
