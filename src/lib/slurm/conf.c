/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum slurm conf`: the gres.conf and slurm.conf lines that describe a node's GPUs to Slurm
 * (gpum/slurm.h). One Name=gpu line per GPU with its type and device file, one Name=shard line
 * per GPU with one shard per unit of the memory gpumd may grant on it, and the NodeName line's
 * Gres= with the totals. Written in gpumd's device order, which is how Slurm numbers them.
 * NVIDIA GPUs are their /dev/nvidiaN files; AMD and Intel GPUs their DRM render nodes
 * (/dev/dri/renderDN), as Slurm's rsmi and oneapi autodetection writes them. On a node of
 * several vendors each line says which variable Slurm sets for its GPU (Flags=nvidia_gpu_env,
 * amd_gpu_env or intel_gpu_env), so that a job is shown its GPUs in its own runtime's terms.
 */
#include <dirent.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/gputype.h>
#include <gpum/size.h>
#include <gpum/slurm.h>

#define MAX_GPUS 64

/* The name's family in lower case, with "_<N>gb" when the name states its memory. Returns 0,
 * 1 when the name states no family (the caller spells it out), or GPUM_ENOSPC. */
static int family_type(const char *device_name, char *buf, size_t len) {
  gpum_gpu_type_t t;
  if (gpum_gpu_type_parse(device_name, &t) != 0 || !t.family[0] ||
      !strpbrk(t.family, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    return 1; /* no family, or only a number ("Thing 9"): spelt out */
  char tmp[GPUM_GPU_FAMILY_LEN + 24];
  size_t n = 0;
  for (const char *p = t.family; *p; p++)
    tmp[n++] = (char)tolower((unsigned char)*p);
  tmp[n] = '\0';
  if (t.memory_gb >= 1)
    snprintf(tmp + n, sizeof tmp - n, "_%.0fgb", t.memory_gb);
  if (strlen(tmp) + 1 > len)
    return gpum_error(GPUM_ENOSPC, "the type of '%s' is longer than %zu bytes", device_name,
                      len - 1);
  memcpy(buf, tmp, strlen(tmp) + 1);
  return 0;
}

int gpum_slurm_gres_type(const char *device_name, char *buf, size_t len) {
  if (!device_name || !buf || len == 0)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_gres_type: NULL argument");
  int rc = family_type(device_name, buf, len);
  if (rc != 1)
    return rc;
  const char *s = device_name;
  if (strncasecmp(s, "NVIDIA ", 7) == 0)
    s += 7;
  size_t n = 0;
  bool sep = false;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (isalnum(c) || c == '.' || c == '-') {
      if (sep && n > 0) {
        if (n + 1 >= len)
          return gpum_error(GPUM_ENOSPC, "the type of '%s' is longer than %zu bytes", device_name,
                            len - 1);
        buf[n++] = '_';
      }
      sep = false;
      if (n + 1 >= len)
        return gpum_error(GPUM_ENOSPC, "the type of '%s' is longer than %zu bytes", device_name,
                          len - 1);
      buf[n++] = (char)tolower(c);
    } else {
      sep = true;
    }
  }
  buf[n] = '\0';
  if (n == 0)
    return gpum_error(GPUM_EINVAL, "device name '%s' gives no Slurm type", device_name);
  return 0;
}

uint64_t gpum_slurm_shards(uint64_t memory_total, const gpum_slurm_conf_opts_t *opts) {
  uint64_t unit = opts && opts->shard_unit ? opts->shard_unit : GPUM_SLURM_SHARD_UNIT;
  double fraction = opts && opts->memory_fraction > 0 ? opts->memory_fraction : 1.0;
  uint64_t margin = opts ? opts->safety_margin : 0;
  uint64_t grantable = (uint64_t)((double)memory_total * fraction);
  if (grantable <= margin)
    return 0;
  return (grantable - margin) / unit;
}

/* The device's minor number (the N of /dev/nvidiaN) as the NVIDIA driver lists it under
 * /proc/driver/nvidia/gpus/<bus id>/information; -1 when it does not (simulated devices). */
static long device_minor(const char *pci_bus_id) {
  size_t n = strlen(pci_bus_id);
  if (n < 12)
    return -1;
  char id[16], path[96];
  snprintf(id, sizeof id, "%s", pci_bus_id + n - 12); /* "0000:3B:00.0" of "00000000:3B:00.0" */
  for (char *p = id; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", id);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[256];
  long minor = -1;
  while (fgets(line, sizeof line, f)) {
    char *end;
    if (strncmp(line, "Device Minor:", 13) == 0) {
      long v = strtol(line + 13, &end, 10);
      if (end != line + 13 && v >= 0)
        minor = v;
      break;
    }
  }
  fclose(f);
  return minor;
}

/* The N of the DRM render node /dev/dri/renderDN of the PCI device bus id (the kernel lists it
 * under /sys/bus/pci/devices/<bus id>/drm/); -1 when it has none (simulated devices). */
static long render_minor(const char *pci_bus_id) {
  size_t n = strlen(pci_bus_id);
  if (n < 12)
    return -1;
  char id[16], path[96];
  snprintf(id, sizeof id, "%s", pci_bus_id + n - 12);
  for (char *p = id; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/drm", id);
  DIR *dir = opendir(path);
  if (!dir)
    return -1;
  long minor = -1;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    char *end;
    if (strncmp(e->d_name, "renderD", 7) != 0)
      continue;
    long v = strtol(e->d_name + 7, &end, 10);
    if (end != e->d_name + 7 && *end == '\0' && v >= 0) {
      minor = v;
      break;
    }
  }
  closedir(dir);
  return minor;
}

#define RENDER_MINOR_BASE 128 /* the first DRM render node: /dev/dri/renderD128 */

/* A growing text buffer; false once out of memory (the caller reports it). */
typedef struct {
  char *s;
  size_t len, cap;
  bool oom;
} text_t;

__attribute__((format(printf, 2, 3))) static void put(text_t *t, const char *fmt, ...) {
  if (t->oom)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->cap - t->len;
    int k = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? room : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      t->oom = true;
      return;
    }
    if ((size_t)k < room) {
      t->len += (size_t)k;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 1024;
    while (cap < t->len + (size_t)k + 1)
      cap *= 2;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

typedef struct {
  char type[GPUM_SLURM_TYPE_MAX];
  char file[512];
  char vendor[16]; /* "nvidia", "amd", "intel" */
  uint64_t shards;
} gpu_t;

/* The node's GPUs in gpumd's order; *n of them. */
static int read_gpus(gpum_device_session_t *s, const gpum_slurm_conf_opts_t *o, gpu_t *gpus,
                     size_t *n) {
  const char *dev_dir = o->dev_dir && *o->dev_dir ? o->dev_dir : "/dev";
  unsigned count = gpum_device_count(s);
  const char *slash = dev_dir[strlen(dev_dir) - 1] == '/' ? "" : "/";
  unsigned render = 0; /* render nodes guessed so far (devices the kernel does not list) */
  *n = 0;
  for (unsigned i = 0; i < count; i++) {
    gpum_device_info_t info;
    int rc = gpum_device_get_info(s, i, &info);
    if (rc != 0)
      return rc;
    if (info.is_host)
      continue;
    if (*n >= MAX_GPUS)
      return gpum_error(GPUM_ENOSPC, "more than %d GPUs", MAX_GPUS);
    gpu_t *g = &gpus[(*n)++];
    if ((rc = gpum_slurm_gres_type(info.name, g->type, sizeof g->type)) != 0)
      return rc;
    snprintf(g->vendor, sizeof g->vendor, "%s", info.vendor ? info.vendor : "nvidia");
    int w;
    if (strcmp(g->vendor, "nvidia") == 0) {
      long minor = device_minor(info.pci_bus_id);
      w = snprintf(g->file, sizeof g->file, "%s%snvidia%ld", dev_dir, slash,
                   minor >= 0 ? minor : (long)info.vendor_index);
    } else {
      long minor = render_minor(info.pci_bus_id);
      if (minor < 0)
        minor = RENDER_MINOR_BASE + render++;
      w = snprintf(g->file, sizeof g->file, "%s%sdri/renderD%ld", dev_dir, slash, minor);
    }
    if (w < 0 || (size_t)w >= sizeof g->file)
      return gpum_error(GPUM_EINVAL, "the device directory '%s' is too long", dev_dir);
    g->shards = gpum_slurm_shards(info.memory_total, o);
  }
  if (*n == 0)
    return gpum_error(GPUM_ENODEV, "no GPU on this node (the %s backend)",
                      gpum_backend_name(gpum_device_backend(s)));
  return 0;
}

/* The Gres= of the NodeName line: gpu:TYPE:COUNT per type (in order of first appearance), then
 * shard:TOTAL. */
static void node_gres(text_t *t, const gpu_t *gpus, size_t n) {
  uint64_t shards = 0;
  for (size_t i = 0; i < n; i++) {
    shards += gpus[i].shards;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++)
      seen = strcmp(gpus[j].type, gpus[i].type) == 0;
    if (seen)
      continue;
    unsigned count = 0;
    for (size_t j = i; j < n; j++)
      count += strcmp(gpus[j].type, gpus[i].type) == 0;
    put(t, "%sgpu:%s:%u", i ? "," : "", gpus[i].type, count);
  }
  put(t, ",shard:%llu", (unsigned long long)shards);
}

static const char *const hw_fields[] = {"CPUs",           "Boards",         "SocketsPerBoard",
                                        "CoresPerSocket", "ThreadsPerCore", "RealMemory"};

/* The index of NAME (of length n) in hw_fields, or -1. */
static int hw_field(const char *name, size_t n) {
  for (size_t i = 0; i < sizeof hw_fields / sizeof hw_fields[0]; i++)
    if (strlen(hw_fields[i]) == n && strncmp(hw_fields[i], name, n) == 0)
      return (int)i;
  return -1;
}

int gpum_slurm_node_line(const char *slurmd_c, const char *node, const char *gres, char **line) {
  if (line)
    *line = NULL;
  if (!slurmd_c || !gres || !line)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_node_line: NULL argument");
  if (!*gres || strpbrk(gres, " \t\n"))
    return gpum_error(GPUM_EINVAL, "'%s' is not a Gres= value", gres);
  if (node && *node && strpbrk(node, " \t\n=,"))
    return gpum_error(GPUM_EINVAL, "'%s' is not a Slurm node name", node);
  /* The first line that starts with NodeName=. */
  const char *l = slurmd_c;
  while (*l && strncmp(l, "NodeName=", 9) != 0) {
    l = strchr(l, '\n');
    l = l ? l + 1 : "";
  }
  if (!*l)
    return gpum_error(GPUM_EINVAL, "slurmd -C printed no NodeName= line");
  size_t len = strcspn(l, "\r\n");
  text_t t = {0};
  bool seen[sizeof hw_fields / sizeof hw_fields[0]] = {false};
  int rc = 0;
  for (size_t i = 0; i < len && rc == 0;) {
    while (i < len && (l[i] == ' ' || l[i] == '\t'))
      i++;
    if (i == len)
      break;
    size_t start = i;
    while (i < len && l[i] != ' ' && l[i] != '\t')
      i++;
    const char *f = l + start, *eq = memchr(f, '=', i - start);
    int flen = (int)(i - start);
    if (!eq || eq == f) {
      rc = gpum_error(GPUM_EINVAL, "slurmd -C's NodeName line has '%.*s', not NAME=VALUE", flen, f);
      break;
    }
    size_t nlen = (size_t)(eq - f), vlen = (size_t)(f + flen - eq - 1);
    const char *v = eq + 1;
    if (nlen == 8 && strncmp(f, "NodeName", 8) == 0) {
      if (vlen == 0 && !(node && *node)) {
        rc = gpum_error(GPUM_EINVAL, "slurmd -C's NodeName line names no node");
        break;
      }
      if (t.len == 0)
        put(&t, "NodeName=%.*s", node && *node ? (int)strlen(node) : (int)vlen,
            node && *node ? node : v);
      continue;
    }
    int k = hw_field(f, nlen);
    if (k < 0)
      continue; /* UpTime=, a Gres= of its own, ...: not the hardware */
    bool digits = vlen > 0 && vlen <= 12;
    for (size_t j = 0; j < vlen && digits; j++)
      digits = isdigit((unsigned char)v[j]) != 0;
    if (!digits || strtoull(v, NULL, 10) == 0) {
      rc = gpum_error(GPUM_EINVAL, "slurmd -C's %.*s is not a positive integer", flen, f);
      break;
    }
    if (!seen[k])
      put(&t, " %.*s", flen, f);
    seen[k] = true;
  }
  if (rc == 0 && (!seen[0] || !seen[5]))
    rc = gpum_error(GPUM_EINVAL,
                    "slurmd -C's NodeName line has no %s=", !seen[0] ? "CPUs" : "RealMemory");
  if (rc == 0)
    put(&t, " Gres=%s", gres);
  if (rc == 0 && t.oom)
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc != 0) {
    free(t.s);
    return rc;
  }
  *line = t.s;
  return 0;
}

int gpum_slurm_conf(gpum_device_session_t *s, const gpum_slurm_conf_opts_t *opts, char **gres_conf,
                    char **slurm_conf) {
  if (gres_conf)
    *gres_conf = NULL;
  if (slurm_conf)
    *slurm_conf = NULL;
  if (!s || !gres_conf || !slurm_conf)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_conf: NULL argument");
  gpum_slurm_conf_opts_t o = opts ? *opts : (gpum_slurm_conf_opts_t){0};
  if (o.memory_fraction < 0 || o.memory_fraction > 1)
    return gpum_error(GPUM_EINVAL, "memory_fraction %g is not within 0..1", o.memory_fraction);
  char host[256] = "";
  const char *node = o.node;
  if (!node || !*node) {
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
      return gpum_error(GPUM_EINVAL, "cannot read this host's name: give the node's name");
    host[strcspn(host, ".")] = '\0';
    node = host;
  }
  if (strpbrk(node, " \t\n=,"))
    return gpum_error(GPUM_EINVAL, "'%s' is not a Slurm node name", node);
  gpu_t *gpus = calloc(MAX_GPUS, sizeof *gpus);
  if (!gpus)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t n = 0;
  int rc = read_gpus(s, &o, gpus, &n);
  if (rc != 0)
    goto out;
  uint64_t unit = o.shard_unit ? o.shard_unit : GPUM_SLURM_SHARD_UNIT;
  text_t g = {0}, c = {0};
  char unit_s[GPUM_SIZE_BUFSZ];
  gpum_size_format(unit, unit_s, sizeof unit_s);
  put(&g,
      "# gres.conf for node %s (gpum slurm conf): %zu GPU%s, one shard per %s that gpumd "
      "may grant\n",
      node, n, n == 1 ? "" : "s", unit_s);
  put(&g, "AutoDetect=off\n");
  bool mixed = false;
  for (size_t i = 1; i < n; i++)
    mixed = mixed || strcmp(gpus[i].vendor, gpus[0].vendor) != 0;
  for (size_t i = 0; i < n; i++) {
    put(&g, "Name=gpu Type=%s File=%s", gpus[i].type, gpus[i].file);
    if (mixed)
      put(&g, " Flags=%s_gpu_env", gpus[i].vendor);
    put(&g, "\n");
  }
  for (size_t i = 0; i < n; i++)
    put(&g, "Name=shard Count=%llu File=%s\n", (unsigned long long)gpus[i].shards, gpus[i].file);
  text_t gr = {0};
  node_gres(&gr, gpus, n);
  char *full = NULL;
  if (!gr.oom && o.slurmd_c && gpum_slurm_node_line(o.slurmd_c, node, gr.s, &full) != 0)
    full = NULL; /* the line as without slurmd -C, to merge by hand */
  if (full) {
    put(&c, "# slurm.conf lines for node %s (gpum slurm conf; the hardware is slurmd -C's)\n",
        node);
    put(&c, "GresTypes=gpu,shard\nSelectType=select/cons_tres\n%s\n", full);
  } else {
    put(&c,
        "# slurm.conf lines for node %s (gpum slurm conf): add its Gres= to the node's "
        "NodeName line\n",
        node);
    put(&c, "GresTypes=gpu,shard\nSelectType=select/cons_tres\nNodeName=%s Gres=%s\n", node,
        gr.s ? gr.s : "");
  }
  free(full);
  if (g.oom || c.oom || gr.oom) {
    free(gr.s);
    free(g.s);
    free(c.s);
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
    goto out;
  }
  free(gr.s);
  *gres_conf = g.s;
  *slurm_conf = c.s;
out:
  free(gpus);
  return rc;
}
