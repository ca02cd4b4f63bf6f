# SPDX-License-Identifier: Apache-2.0
"""gpum for Python: reservations, memory estimates, adaptive batches, the tier cache and the
profiler over libgpum.

See docs/python.md in gpum's source tree.
"""
from ._lib import lib as _lib, path as library_path
from . import _types

_types.check_abi()

from .errors import (  # noqa: E402
    Busy, DaemonUnavailable, GpumError, Interrupted, InvalidArgument, NeverFits, NotFound,
    OutOfMemory, PermissionDenied, Timeout,
)
from .units import Size, format_figure, format_size  # noqa: E402
from .estimate import Estimate, accumulation, estimate, presets  # noqa: E402
from .adaptive import Adaptive, BatchInfo, BatchStats, adaptive  # noqa: E402
from .reserve import (  # noqa: E402
    CudaAlreadyInitialized, Device, Pressure, Reservation, reserve,
)
from .node import Gpu, Status, devices, reservation, reservations, status  # noqa: E402
from .pool import Pool, PoolStats  # noqa: E402
from .monitor import Monitor  # noqa: E402
from .batcher import Batcher, BatcherStats  # noqa: E402
from .tiercache import Placement, Tier, TierCache, TierCacheStats, TierStats  # noqa: E402
from .report import Reporter  # noqa: E402
from .manager import (  # noqa: E402
    DeviceChoice, GPUConfig, GPUConfigBuilder, GPUManager, ReleaseReport,
)
# gpum.profile is the function (the module stays importable: `from gpum.profile import ...`);
# the report is gpum.profile_report, since gpum.report is the Reporter's module.
from .profile import (  # noqa: E402
    BenchmarkResult, Profiler, Summary, WindowStats, benchmark, profile, summary,
    window_stats, report as profile_report,
)
from .optimize import (  # noqa: E402
    EstimatorView, ModelPrecision, OptimizationLevel, OptimizationReport, OptimizationStep,
    OptLevel, Precision, optimize,
)
# Serving (gpum.serving): models served by name through the batcher.
from .serving import BatchProcessor, ModelStats  # noqa: E402

__version__ = _lib.gpum_version().decode()

__all__ = [
    "GpumError", "InvalidArgument", "NotFound", "OutOfMemory", "Timeout", "PermissionDenied",
    "DaemonUnavailable", "NeverFits", "Busy", "Interrupted", "CudaAlreadyInitialized",
    "estimate", "Estimate", "presets", "accumulation", "adaptive", "Adaptive", "BatchInfo",
    "BatchStats", "reserve", "Reservation", "Device", "Pressure", "library_path", "devices",
    "status", "reservation", "reservations", "Status", "Gpu", "Pool", "PoolStats", "Monitor", "Batcher",
    "BatcherStats", "TierCache", "TierCacheStats", "TierStats", "Tier", "Placement", "Reporter",
    "profile", "Profiler", "Summary", "summary", "profile_report", "benchmark", "BenchmarkResult",
    "window_stats", "WindowStats",
    "optimize", "OptLevel", "Precision", "OptimizationLevel", "ModelPrecision",
    "OptimizationReport", "OptimizationStep", "EstimatorView",
    "GPUConfig", "GPUConfigBuilder", "GPUManager", "DeviceChoice", "ReleaseReport",
    # Serving
    "BatchProcessor", "ModelStats",
    # Sizes and figures as libgpum writes them
    "Size", "format_size", "format_figure",
]
