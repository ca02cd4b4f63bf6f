/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build-time check of our libslurm declarations (src/abi/slurm_abi.h) against the real
 * slurm/slurm.h (libslurm-dev). Compiled only where slurm.h is installed. Every check is a
 * static assertion, so a mismatch fails the build; running the program only reports what was
 * checked.
 */
#include <slurm/slurm.h>
#include <stdio.h>

#define GPUM_SLURM_MSG_T node_info_msg_t
#define GPUM_SLURM_PLUGIN_DATA_T dynamic_plugin_data_t
#define GPUM_SLURM_NODEDATA_T enum select_nodedata_type
#define GPUM_SLURM_NODE_STATES_T enum node_states
#include "slurm_abi.h"

_Static_assert(SLURM_VERSION_NUMBER >> 8 == SLURM_VERSION_NUM(22, 5, 0) >> 8,
               "slurm_abi.h declares Slurm 22.05 (libslurm.so.38)");

#define CHECK_CONST(name, value) _Static_assert((long long)(name) == (value), "constant " #name);
GPUM_SLURM_CONSTS(CHECK_CONST)

/* Every field at the same offset with the same size, and the same struct size: the array of
 * node_info_t is walked with our stride. */
#define CHECK_NODE(type, field)                                                           \
  _Static_assert(offsetof(node_info_t, field) == offsetof(gpum_slurm_node_info_t, field), \
                 "offset of node_info_t." #field);                                        \
  _Static_assert(sizeof(((node_info_t *)0)->field) == sizeof(type), "size of "            \
                                                                    "node_info_t." #field);
GPUM_SLURM_NODE_INFO_FIELDS(CHECK_NODE)
_Static_assert(sizeof(node_info_t) == sizeof(gpum_slurm_node_info_t), "sizeof node_info_t");

#define CHECK_MSG(type, field)                                                                    \
  _Static_assert(offsetof(node_info_msg_t, field) == offsetof(gpum_slurm_node_info_msg_t, field), \
                 "offset of node_info_msg_t." #field);
GPUM_SLURM_NODE_INFO_MSG_FIELDS(CHECK_MSG)
_Static_assert(sizeof(node_info_msg_t) == sizeof(gpum_slurm_node_info_msg_t),
               "sizeof node_info_msg_t");

/* Our prototypes, spelled with slurm.h's message type, must be the very types slurm.h declares. */
#define CHECK_FUNC(ret, name, params)                                               \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), \
                 "prototype of " #name);
GPUM_SLURM_FUNCS(CHECK_FUNC)

/* libgpum calls with int for the two enums and void * for the plugin data. */
_Static_assert(sizeof(enum select_nodedata_type) == sizeof(int), "enum select_nodedata_type");
_Static_assert(sizeof(enum node_states) == sizeof(int), "enum node_states");

#define COUNT(...) +1
int main(void) {
  printf("checked against Slurm %d.%02d: %d constants, %d node_info_t fields, %d prototypes\n",
         SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
         0 GPUM_SLURM_CONSTS(COUNT), 0 GPUM_SLURM_NODE_INFO_FIELDS(COUNT),
         0 GPUM_SLURM_FUNCS(COUNT));
  return 0;
}
