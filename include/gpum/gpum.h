/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libgpum, all of it: `#include <gpum/gpum.h>` and link with -lgpum. Each module also has a
 * header of its own (one per audience, as listed below), for programs that want less.
 *
 *   version.h      the library's version
 *   error.h        error codes, gpum_strerror() and the per-thread detail message
 *   log.h          leveled logging (to stderr or a callback)
 *   size.h         sizes ("8GiB") and durations ("1h30m") parsed and printed
 *   clock.h        the monotonic and wall clocks in nanoseconds
 *   options.h      the options table, the YAML config, GPUM_* environment variables
 *   device.h       GPU discovery and sampling over NVML (or the host as a device)
 *   xid.h          what an NVIDIA XID error means
 *   gputype.h      GPU types as people write them: vendor, family, memory; matching a request
 *   monitor.h      sampler threads, history, health state machine
 *   alert.h        alert rules, levels and callbacks
 *   profile.h      named timers and a benchmark helper
 *   pool.h         the caching pool allocator for device, pinned and host memory
 *   pool_replay.h  replays allocation logs against the pool's strategies
 *   torch.h        the pool as PyTorch's CUDA allocator, one pool per device
 *   client.h       the gpumd client: reservations, events, node status
 *   session.h      a reservation held for a job's life, and the environment of its grant
 *   fence.h        a reservation's memory fence: one limit per device for all of a job's processes
 *   report.h       workload reports: a job's pool, batcher and cache figures sent to gpumd
 *   slurm.h        Slurm: the gres.conf and slurm.conf lines, and a job step's reservation
 *   estimate.h     how much GPU memory a model needs to train or serve, and the batch that fits
 *   batch.h        the adaptive batch runner: batches kept as large as memory allows
 *   batcher.h      the dynamic request batcher: single requests into batches, memory-bounded
 *   tiercache.h    keyed buffers kept on the GPU, spilled to pinned then host memory when short
 *   abi.h          the layouts of the structs language bindings mirror (sizes, field offsets)
 *
 * Every header also includes export.h (GPUM_API: what the library exports).
 *
 * The simulated driver's control API (gpum/sim.h) belongs to libgpum_sim.so, not libgpum, and
 * is not included here.
 */
#ifndef GPUM_GPUM_H
#define GPUM_GPUM_H

#include <gpum/abi.h>
#include <gpum/alert.h>
#include <gpum/batch.h>
#include <gpum/batcher.h>
#include <gpum/checkpoint.h>
#include <gpum/client.h>
#include <gpum/clock.h>
#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/estimate.h>
#include <gpum/fence.h>
#include <gpum/gputype.h>
#include <gpum/log.h>
#include <gpum/monitor.h>
#include <gpum/options.h>
#include <gpum/session.h>
#include <gpum/pool.h>
#include <gpum/pool_replay.h>
#include <gpum/profile.h>
#include <gpum/report.h>
#include <gpum/size.h>
#include <gpum/slurm.h>
#include <gpum/tiercache.h>
#include <gpum/torch.h>
#include <gpum/version.h>
#include <gpum/xid.h>

#endif /* GPUM_GPUM_H */
