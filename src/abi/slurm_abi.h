/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the libslurm subset gpum uses to list a cluster's nodes: Slurm 22.05's
 * (libslurm.so.38, Debian 12), whose slurm.h is not needed to build libgpum. libgpum dlopens
 * exactly that soname, and a soname names one ABI: another Slurm release has another soname
 * (23.02's is libslurm.so.39, with another node_info_t) and is not loaded.
 *
 * node_info_t is read as an array, so its whole layout matters, not only the fields we read:
 * every field is listed, in order, in GPUM_SLURM_NODE_INFO_FIELDS, and the struct is generated
 * from the list. tests/abi/check_slurm_abi.c (built where libslurm-dev's slurm/slurm.h is
 * installed) compares every field's offset and size, the struct's size, each constant and each
 * prototype with slurm.h's; the static assertions below pin the fields we read on LP64.
 */
#ifndef GPUM_SLURM_ABI_H
#define GPUM_SLURM_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define GPUM_SLURM_SONAME "libslurm.so.38"

/* X(name, value): constants, by slurm.h's names. */
#define GPUM_SLURM_CONSTS(X)             \
  X(SHOW_ALL, 0x0001)                    \
  X(SHOW_DETAIL, 0x0002)                 \
  X(SELECT_NODEDATA_SUBCNT, 2)           \
  X(NODE_STATE_UNKNOWN, 0)               \
  X(NODE_STATE_DOWN, 1)                  \
  X(NODE_STATE_IDLE, 2)                  \
  X(NODE_STATE_ALLOCATED, 3)             \
  X(NODE_STATE_ERROR, 4)                 \
  X(NODE_STATE_MIXED, 5)                 \
  X(NODE_STATE_FUTURE, 6)                \
  X(NODE_STATE_BASE, 0x0000000f)         \
  X(NODE_STATE_RES, 0x00000020)          \
  X(NODE_STATE_DRAIN, 0x00000200)        \
  X(NODE_STATE_COMPLETING, 0x00000400)   \
  X(NODE_STATE_NO_RESPOND, 0x00000800)   \
  X(NODE_STATE_POWERED_DOWN, 0x00001000) \
  X(NODE_STATE_FAIL, 0x00002000)         \
  X(NODE_STATE_MAINT, 0x00008000)

/* X(type, field): node_info_t of Slurm 22.05, every field in slurm.h's order. Pointers to
 * structures we never read are void *. */
#define GPUM_SLURM_NODE_INFO_FIELDS(X) \
  X(char *, arch)                      \
  X(char *, bcast_address)             \
  X(uint16_t, boards)                  \
  X(time_t, boot_time)                 \
  X(char *, cluster_name)              \
  X(uint16_t, cores)                   \
  X(uint16_t, core_spec_cnt)           \
  X(uint32_t, cpu_bind)                \
  X(uint32_t, cpu_load)                \
  X(uint64_t, free_mem)                \
  X(uint16_t, cpus)                    \
  X(uint16_t, cpus_efctv)              \
  X(char *, cpu_spec_list)             \
  X(void *, energy)                    \
  X(void *, ext_sensors)               \
  X(char *, extra)                     \
  X(void *, power)                     \
  X(char *, features)                  \
  X(char *, features_act)              \
  X(char *, gres)                      \
  X(char *, gres_drain)                \
  X(char *, gres_used)                 \
  X(time_t, last_busy)                 \
  X(char *, mcs_label)                 \
  X(uint64_t, mem_spec_limit)          \
  X(char *, name)                      \
  X(uint32_t, next_state)              \
  X(char *, node_addr)                 \
  X(char *, node_hostname)             \
  X(uint32_t, node_state)              \
  X(char *, os)                        \
  X(uint32_t, owner)                   \
  X(char *, partitions)                \
  X(uint16_t, port)                    \
  X(uint64_t, real_memory)             \
  X(char *, comment)                   \
  X(char *, reason)                    \
  X(time_t, reason_time)               \
  X(uint32_t, reason_uid)              \
  X(void *, select_nodeinfo)           \
  X(time_t, slurmd_start_time)         \
  X(uint16_t, sockets)                 \
  X(uint16_t, threads)                 \
  X(uint32_t, tmp_disk)                \
  X(uint32_t, weight)                  \
  X(char *, tres_fmt_str)              \
  X(char *, version)

#define GPUM__SLURM_FIELD(type, field) type field;
typedef struct {
  GPUM_SLURM_NODE_INFO_FIELDS(GPUM__SLURM_FIELD)
} gpum_slurm_node_info_t;
#undef GPUM__SLURM_FIELD

/* X(type, field): node_info_msg_t. */
#define GPUM_SLURM_NODE_INFO_MSG_FIELDS(X) \
  X(time_t, last_update)                   \
  X(uint32_t, record_count)                \
  X(gpum_slurm_node_info_t *, node_array)

#define GPUM__SLURM_FIELD(type, field) type field;
typedef struct {
  GPUM_SLURM_NODE_INFO_MSG_FIELDS(GPUM__SLURM_FIELD)
} gpum_slurm_node_info_msg_t;
#undef GPUM__SLURM_FIELD

#if defined(__LP64__)
_Static_assert(sizeof(gpum_slurm_node_info_t) == 336, "node_info_t of Slurm 22.05");
_Static_assert(offsetof(gpum_slurm_node_info_t, gres) == 128, "node_info_t.gres");
_Static_assert(offsetof(gpum_slurm_node_info_t, gres_used) == 144, "node_info_t.gres_used");
_Static_assert(offsetof(gpum_slurm_node_info_t, name) == 176, "node_info_t.name");
_Static_assert(offsetof(gpum_slurm_node_info_t, node_state) == 208, "node_info_t.node_state");
_Static_assert(offsetof(gpum_slurm_node_info_t, real_memory) == 248, "node_info_t.real_memory");
_Static_assert(offsetof(gpum_slurm_node_info_msg_t, node_array) == 16, "node_info_msg_t");
#endif

/* The types as the prototypes spell them: tests/abi/check_slurm_abi.c defines them as
 * slurm.h's (node_info_msg_t, dynamic_plugin_data_t, the enums select_nodedata_type and
 * node_states, each the size of an int) before it includes this file, to compare the
 * prototypes. */
#ifndef GPUM_SLURM_MSG_T
#define GPUM_SLURM_MSG_T gpum_slurm_node_info_msg_t
#define GPUM_SLURM_PLUGIN_DATA_T void
#define GPUM_SLURM_NODEDATA_T int
#define GPUM_SLURM_NODE_STATES_T int
#endif

/* X(return type, name, params): the functions resolved from libslurm.so.38. */
#define GPUM_SLURM_FUNCS(X)                                                               \
  X(void, slurm_init, (const char *conf))                                                 \
  X(int, slurm_load_node, (time_t update_time, GPUM_SLURM_MSG_T * *resp, uint16_t flags)) \
  X(void, slurm_free_node_info_msg, (GPUM_SLURM_MSG_T * msg))                             \
  X(int, slurm_get_select_nodeinfo,                                                       \
    (GPUM_SLURM_PLUGIN_DATA_T * nodeinfo, GPUM_SLURM_NODEDATA_T type,                     \
     GPUM_SLURM_NODE_STATES_T state, void *data))                                         \
  X(char *, slurm_strerror, (int errnum))                                                 \
  X(int, slurm_get_errno, (void))

#define GPUM__SLURM_FN(ret, name, params) typedef ret(*gpum_##name##_fn) params;
GPUM_SLURM_FUNCS(GPUM__SLURM_FN)
#undef GPUM__SLURM_FN

#endif /* GPUM_SLURM_ABI_H */
