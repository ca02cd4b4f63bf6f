/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum slurm conf`: prints the gres.conf and slurm.conf lines that describe this node's GPUs
 * to Slurm (gpum/slurm.h, docs/slurm.md): a gres/gpu per GPU and one gres/shard per unit of the
 * memory gpumd may grant on it, so that Slurm's placement bin-packs memory per GPU.
 * `gpum slurm nodes`: the cluster's GPU nodes as Slurm's controller lists them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <gpum/error.h>
#include <gpum/size.h>
#include <gpum/slurm.h>

#include "args.h"
#include "cli.h"

enum {
  O_SHARD_UNIT = 1,
  O_NODE,
  O_DEV_DIR,
  O_GRES,
  O_SLURM,
  O_INSTALL,
  O_PLUGIN,
  O_JSON,
  O_COUNT_ /* the size of the values array */
};

static char plugin_help[512]; /* --plugin's, with the default path (slurm_help_text) */

static cli_arg_t conf_args[] = {
    {O_SHARD_UNIT, "--shard-unit", 0, "SIZE", "memory per shard (default 1GiB)", 0},
    {O_NODE, "--node", 0, "NAME", "the node's Slurm name (default: this host's short name)", 0},
    {O_DEV_DIR, "--dev-dir", 0, "DIR", "where the nvidiaN device files are (default /dev)", 0},
    {O_GRES, "--gres", 0, NULL, "print only the gres.conf lines", 0},
    {O_SLURM, "--slurm", 0, NULL, "print only the slurm.conf lines", 0},
    {O_INSTALL, "--install", 0, "DIR",
     "write the gres.conf lines to DIR/gres.conf (an existing one with other lines is kept as "
     "DIR/gres.conf.old), add 'required PATH [ARGS]' to DIR/plugstack.conf unless it names "
     "gpum_spank.so already, say what was written, and print the slurm.conf lines to add: "
     "DIR/slurm.conf is never written",
     0},
    {O_PLUGIN, "--plugin", 0, "'PATH [ARGS]'", plugin_help, 0},
    {0},
};

static const cli_cmd_spec_t conf_spec = {
    .name = "slurm conf",
    .usage = "[--shard-unit SIZE] [--node NAME] [--dev-dir DIR] [--gres | --slurm]\n"
             "[--shard-unit SIZE] [--node NAME] [--dev-dir DIR] --install DIR\n"
             " [--plugin 'PATH [ARGS]']",
    .summary = "Print this node's lines for Slurm's gres.conf and slurm.conf.",
    .text = "From the GPUs the device layer sees (docs/slurm.md):\n"
            "  gres.conf   AutoDetect=off; 'Name=gpu Type=TYPE File=DIR/nvidiaN' per GPU and\n"
            "              'Name=shard Count=C File=DIR/nvidiaN' per GPU, one shard per SIZE\n"
            "              of what gpumd may grant on it (total x memory_fraction -\n"
            "              safety_margin)\n"
            "  slurm.conf  GresTypes=gpu,shard, SelectType=select/cons_tres and the node's\n"
            "              NodeName line: the one of `slurmd -C` (CPUs=, Boards=, ...,\n"
            "              RealMemory=) with 'Gres=gpu:TYPE:N,shard:M' appended, when\n"
            "              slurmd is on PATH and answers within 5 s; else 'NodeName=NAME\n"
            "              Gres=...' only, under a comment saying to merge the Gres= into\n"
            "              the node's own line\n"
            "The GPUs are listed in gpumd's order: Slurm's GPU k is gpumd's device k.",
    .args = conf_args,
    .examples = "gpum slurm conf --gres\n"
                "sudo gpum slurm conf --install /etc/slurm",
    .exit_status = "0, 1 when the node has no GPU or the devices cannot be read, 2 for usage "
                   "errors.",
};

static void slurm_help_text(void) {
  snprintf(plugin_help, sizeof plugin_help, "the plugin's line for --install (default %s)",
           gpum_slurm_plugin_path());
}

static const cli_arg_t nodes_args[] = {
    {O_JSON, "--json", 0, NULL, "print a JSON document", 0},
    {0},
};

static const cli_cmd_spec_t nodes_spec = {
    .name = "slurm nodes",
    .usage = "[--json]",
    .summary = "List the cluster's GPU nodes from Slurm's controller.",
    .text = "From libslurm.so.38 (Slurm 22.05; slurm.conf from $SLURM_CONF or /etc/slurm):\n"
            "each node's GPU types with how many it has and how many jobs hold, and its state.",
    .args = nodes_args,
    .examples = "gpum slurm nodes\n"
                "gpum slurm nodes --json | jq '.nodes[].name'",
    .exit_status = "0, 1 when Slurm is not available here or its controller does not answer, 2 "
                   "for usage errors.",
};

static const cli_arg_t no_args[] = {{0}};
static const cli_cmd_spec_t *const slurm_subs[] = {&conf_spec, &nodes_spec, NULL};

static const cli_cmd_spec_t slurm_spec = {
    .name = "slurm",
    .usage = "COMMAND [ARGS]",
    .summary = "This node's gres.conf and slurm.conf lines; the cluster's GPU nodes.",
    .text = "docs/slurm.md.",
    .args = no_args,
    .examples = "gpum slurm conf\n"
                "gpum slurm nodes",
    .exit_status = "0 success, 1 failure, 2 usage error.",
    .subs = slurm_subs,
};

/* The output of `slurmd -C` (this node's hardware as slurm.conf's NodeName line), or NULL when
 * slurmd is not on PATH, fails or takes more than 5 s. malloc'd. */
static char *slurmd_hardware(void) {
  FILE *p = popen("timeout -k 1 5 slurmd -C 2>/dev/null </dev/null", "r");
  if (!p)
    return NULL;
  char *out = NULL;
  size_t len = 0, cap = 0;
  char buf[1024];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) {
    if (len + k + 1 > cap) {
      size_t ncap = cap ? cap * 2 : 4096;
      while (ncap < len + k + 1)
        ncap *= 2;
      char *n = realloc(out, ncap);
      if (!n || ncap > (1u << 20)) {
        free(n ? n : out);
        pclose(p);
        return NULL;
      }
      out = n;
      cap = ncap;
    }
    memcpy(out + len, buf, k);
    len += k;
    out[len] = '\0';
  }
  if (pclose(p) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

static int slurm_conf(gpum_config_t *cfg, int argc, char **argv) {
  const char *v[O_COUNT_] = {0}, *pos[1];
  int np, rc = cli_args_collect(&conf_spec, argc, argv, v, O_COUNT_, pos, 0, 0, &np);
  if (rc != 0)
    return rc == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  const char *unit = v[O_SHARD_UNIT], *node = v[O_NODE], *dev_dir = v[O_DEV_DIR],
             *install = v[O_INSTALL], *plugin = v[O_PLUGIN];
  bool gres_only = v[O_GRES] != NULL, slurm_only = v[O_SLURM] != NULL;
  gpum_slurm_conf_opts_t o = {.node = node,
                              .dev_dir = dev_dir,
                              .memory_fraction = gpum_config_get_double(cfg, "memory_fraction"),
                              .safety_margin = gpum_config_get_size(cfg, "safety_margin")};
  if (unit && (gpum_size_parse(unit, &o.shard_unit) != 0 || o.shard_unit < (1u << 20))) {
    fprintf(stderr,
            "gpum slurm conf: --shard-unit needs a size of at least 1MiB, such as 1GiB "
            "(got '%s')\n",
            unit);
    return CLI_EXIT_USAGE;
  }
  if (node && (!*node || strpbrk(node, " \t\n=,"))) {
    fprintf(stderr, "gpum slurm conf: --node: '%s' is not a Slurm node name\n", node);
    return CLI_EXIT_USAGE;
  }
  if (dev_dir && dev_dir[0] != '/') {
    fprintf(stderr, "gpum slurm conf: --dev-dir needs an absolute path (got '%s')\n", dev_dir);
    return CLI_EXIT_USAGE;
  }
  if (gres_only && slurm_only) {
    fprintf(stderr, "gpum slurm conf: give --gres or --slurm, not both\n");
    return CLI_EXIT_USAGE;
  }
  if (install && (gres_only || slurm_only || !*install)) {
    fprintf(stderr, "gpum slurm conf: --install DIR writes gres.conf and prints the slurm.conf "
                    "lines: without --gres or --slurm\n");
    return CLI_EXIT_USAGE;
  }
  if (plugin && (!install || !strstr(plugin, "gpum_spank.so") || strchr(plugin, '\n'))) {
    fprintf(stderr,
            "gpum slurm conf: --plugin needs --install and the path of gpum_spank.so (got "
            "'%s')\n",
            plugin);
    return CLI_EXIT_USAGE;
  }
  gpum_device_session_t *s = NULL;
  if ((rc = cli_open_session(cfg, &s)) != 0) {
    fprintf(stderr, "gpum slurm conf: cannot read the GPUs: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  char *gres = NULL, *lines = NULL, *hw = gres_only ? NULL : slurmd_hardware();
  o.slurmd_c = hw;
  rc = gpum_slurm_conf(s, &o, &gres, &lines);
  gpum_device_close(s);
  free(hw);
  if (rc != 0) {
    fprintf(stderr, "gpum slurm conf: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  if (install) {
    char *report = NULL;
    rc = gpum_slurm_install(install, gres, plugin, &report);
    if (rc == 0) {
      fputs(report, stdout);
      fprintf(stdout,
              "slurm.conf: not changed; add these lines to it (the same file on every node and "
              "the controller), then restart slurmctld and slurmd:\n\n%s",
              lines);
    } else {
      fprintf(stderr, "gpum slurm conf: --install %s: %s\n", install, cli_reason(rc));
    }
    free(report);
    free(gres);
    free(lines);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  }
  if (!slurm_only)
    fputs(gres, stdout);
  if (!gres_only && !slurm_only)
    fputs("\n", stdout);
  if (!gres_only)
    fputs(lines, stdout);
  free(gres);
  free(lines);
  return CLI_EXIT_OK;
}

/* One node as `gpum slurm nodes --json` shows it. */
static json_t *node_json(const gpum_slurm_node_t *nd) {
  json_t *gpus = json_array();
  for (size_t i = 0; gpus && i < nd->ntypes; i++)
    json_array_append_new(gpus, json_pack("{s:s, s:I, s:I}", "type", nd->gpus[i].type, "total",
                                          (json_int_t)nd->gpus[i].total, "used",
                                          (json_int_t)nd->gpus[i].used));
  return json_pack("{s:s, s:s, s:b, s:I, s:o*}", "name", nd->name, "state", nd->state, "usable",
                   nd->usable, "real_memory_mib", (json_int_t)nd->real_memory_mib, "gpus", gpus);
}

static int slurm_nodes(int argc, char **argv) {
  const char *v[O_COUNT_] = {0}, *pos[1];
  int np, rc = cli_args_collect(&nodes_spec, argc, argv, v, O_COUNT_, pos, 0, 0, &np);
  if (rc != 0)
    return rc == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  bool as_json = v[O_JSON] != NULL;
  gpum_slurm_node_t *nodes = NULL;
  size_t n = 0;
  if ((rc = gpum_slurm_gpu_nodes(&nodes, &n)) != 0) {
    fprintf(stderr, "gpum slurm nodes: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  if (as_json) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
      json_array_append_new(arr, node_json(&nodes[i]));
    json_t *doc = arr ? json_pack("{s:o}", "nodes", arr) : NULL;
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    if (text)
      printf("%s\n", text);
    free(text);
    json_decref(doc);
    gpum_slurm_nodes_free(nodes);
    if (!text) {
      fprintf(stderr, "gpum slurm nodes: out of memory\n");
      return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
  }
  printf("%-20s %-24s %-24s %5s %5s %5s\n", "NODE", "STATE", "GPU TYPE", "TOTAL", "USED", "FREE");
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < nodes[i].ntypes; j++) {
      const gpum_slurm_gpus_t *g = &nodes[i].gpus[j];
      printf("%-20s %-24s %-24s %5u %5u %5u\n", nodes[i].name, nodes[i].state,
             g->type[0] ? g->type : "-", g->total, g->used, g->total - g->used);
    }
  if (n == 0)
    printf("(no node with a gres/gpu)\n");
  gpum_slurm_nodes_free(nodes);
  return CLI_EXIT_OK;
}

int cmd_slurm(gpum_config_t *cfg, int argc, char **argv) {
  slurm_help_text();
  if (argc < 2) {
    cli_args_help(&slurm_spec, stderr);
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    cli_args_help(&slurm_spec, stdout);
    return CLI_EXIT_OK;
  }
  const cli_cmd_spec_t *spec = cli_args_find_sub(&slurm_spec, argv[1]);
  if (spec == &conf_spec)
    return slurm_conf(cfg, argc - 1, argv + 1);
  if (spec == &nodes_spec)
    return slurm_nodes(argc - 1, argv + 1);
  return CLI_EXIT_USAGE;
}
