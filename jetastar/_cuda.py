"""The optional CUDA backend: loading numba's CUDA target, telling whether a GPU can be used, and
resolving a ``device`` option (``"cpu"``, ``"gpu"``, ``"auto"``).

Nothing here imports ``numba.cuda`` at import time: :func:`load_cuda` does, on the first request for
a GPU, so CPU-only runs never pay for it. ``numba.cuda`` is numba's CUDA target (the ``numba-cuda``
package, ``pip install "jetastar[gpu]"``; older numba releases ship a built-in copy). The CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the same kernels in Python on the CPU: the test suite
uses it. ``device="auto"`` never picks the simulator (it is for tests, and thousands of times slower
than the CPU engines); ``device="gpu"`` uses it when it is switched on.

Version skew: some numba-cuda releases still reference ``numpy.row_stack``, which numpy 2.5 removed,
so ``import numba.cuda`` fails there with an AttributeError. :func:`load_cuda` gives numpy that
alias (``numpy.vstack``, the function it always was) only when it is missing, before the import.

Example:
    >>> status = gpu_status()
    >>> sorted(status)
    ['available', 'device', 'reason', 'simulator']
    >>> resolve_device("cpu")
    'cpu'
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import warnings
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from .errors import GpuUnavailableError, OptionError

__all__ = [
    "DEVICES",
    "INSTALL_HINT",
    "check_device",
    "gpu_status",
    "gpus_for_workers",
    "load_cuda",
    "resolve_device",
    "simulator_enabled",
]

#: Values of every ``device`` option.
DEVICES = ("cpu", "gpu", "auto")
#: What to install for the GPU backend.
INSTALL_HINT = ('pip install "jetastar[gpu]" (numba-cuda with the CUDA 12 compiler libraries NVVM '
                'and NVRTC; "jetastar[gpu-cu13]" for CUDA 13; needs an NVIDIA GPU and its driver)')


def simulator_enabled() -> bool:
    """True when numba's CUDA simulator is switched on (``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba.core import config

    return bool(getattr(config, "ENABLE_CUDASIM", 0)) or os.environ.get(
        "NUMBA_ENABLE_CUDASIM", "0"
    ) not in ("", "0")


def load_cuda() -> ModuleType:
    """``numba.cuda``, imported on first use (with the numpy alias described in the module docstring).

    Raises:
        GpuUnavailableError: numba's CUDA target cannot be imported (the message has the install
            hint and the import error).
    """
    return _load_cuda()


@functools.lru_cache(maxsize=1)
def _load_cuda() -> ModuleType:
    if not hasattr(np, "row_stack"):  # removed in numpy 2.5; some numba-cuda releases still use it
        setattr(np, "row_stack", np.vstack)  # noqa: B010 - the alias numba-cuda looks up
    try:
        import numba.cuda as cuda
    except Exception as exc:  # ImportError, or an AttributeError of a mismatched numba-cuda
        raise GpuUnavailableError(_import_failure(exc)) from exc
    return cuda


def _import_failure(exc: Exception) -> str:
    """Why ``numba.cuda`` did not import, and what to do: install the extra only where numba-cuda
    is not installed (a warning turned into an error, or a mismatched release, is not fixed by
    installing it again).

    Example:
        >>> "PYTHONWARNINGS" in _import_failure(DeprecationWarning("old"))
        True
    """
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, Warning):
        return (f"numba's CUDA target did not import: a warning it gave was turned into an error "
                f"({what}); let warnings through while it imports (PYTHONWARNINGS, -W error, "
                "pytest's filterwarnings)")
    try:
        installed = importlib.util.find_spec("numba_cuda") is not None
    except (ImportError, ValueError):
        installed = False
    if installed and not isinstance(exc, ModuleNotFoundError):
        return (f"numba-cuda is installed but numba's CUDA target did not import ({what}); check "
                "that the numba and numba-cuda releases go together (pip check)")
    return f"the GPU backend needs numba's CUDA target, which did not import ({what}); {INSTALL_HINT}"


class _Probe(NamedTuple):
    """What :func:`_probe` found."""

    usable: bool
    device: str
    reason: str
    found: bool  # a GPU (or the simulator) was found, usable or not


@functools.lru_cache(maxsize=1)
def _probe() -> _Probe:
    """Whether the GPU backend can run here, found once per process: numba's CUDA target
    imports, a GPU is visible, and a tiny kernel compiles and runs on it (:func:`_test_kernel`;
    a driver without the CUDA compiler libraries passes the first two and fails the third)."""
    try:
        cuda = load_cuda()
    except GpuUnavailableError as exc:
        return _Probe(False, "", str(exc), False)
    if simulator_enabled():
        return _Probe(True, "CUDA simulator",
                      "NUMBA_ENABLE_CUDASIM=1: kernels run in the CUDA simulator", True)
    try:
        if not cuda.is_available():
            return _Probe(False, "", (
                "numba's CUDA target is installed but finds no usable GPU (no NVIDIA driver or "
                "device visible to this process)"), False)
        dev = cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        cc = "{}.{}".format(*dev.compute_capability)
    except Exception as exc:  # driver errors surface as many different types
        return _Probe(False, "", f"the CUDA driver failed to start ({type(exc).__name__}: {exc})",
                      False)
    name = f"{name} (compute capability {cc})"
    failure = _test_kernel(cuda)
    if failure is not None:
        return _Probe(False, name, (
            f"{name} was found, but a test kernel did not compile and run ({failure}); "
            f"{INSTALL_HINT}"), True)
    return _Probe(True, name, f"found {name}", True)


def _test_kernel(cuda: ModuleType) -> str | None:
    """Compile and run a one-thread kernel; ``None`` when it ran and returned the right value,
    else why not (a missing ``libnvrtc``/``libnvvm``, a driver too old for the toolkit, ...).

    Example:
        >>> import types
        >>> def broken_jit(*args, **kwargs):
        ...     raise OSError("libnvrtc.so.13: cannot open shared object file")
        >>> _test_kernel(types.SimpleNamespace(jit=broken_jit))
        'OSError: libnvrtc.so.13: cannot open shared object file'
    """
    try:
        @cuda.jit
        def _halve_and_add_one(out):  # pragma: no cover - device code
            out[0] = out[0] * 0.5 + 1.0

        d_out = cuda.to_device(np.full(1, 2.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba-cuda's low-occupancy warning for one thread
            _halve_and_add_one[1, 1](d_out)
        got = float(d_out.copy_to_host()[0])
    except Exception as exc:  # compiler, linker and driver errors have many types
        return f"{type(exc).__name__}: {exc}"
    return None if got == 2.0 else f"it returned {got!r} instead of 2.0"


@functools.cache
def _say_cpu_fallback(reason: str) -> None:
    """One line on stderr, once per process and reason, when ``device="auto"`` falls back to the
    CPU although a GPU was found."""
    print(f"jetastar: device='auto' runs on the CPU: {reason}", file=sys.stderr, flush=True)


def gpu_status() -> dict[str, Any]:
    """Whether the GPU backend can run here, on what, and why (or why not).

    Returns:
        ``{"available": bool, "simulator": bool, "device": str, "reason": str}``.

    Example:
        >>> isinstance(gpu_status()["available"], bool)
        True
    """
    usable, name, reason, _found = _probe()
    return {
        "available": usable,
        "simulator": usable and simulator_enabled(),
        "device": name,
        "reason": reason,
    }


def gpus_for_workers(device: Any) -> list[str]:
    """The GPUs worker processes are spread over (one per process, round robin), as
    ``CUDA_VISIBLE_DEVICES`` entries; empty when ``device`` is ``None`` (not asked for) or
    ``"cpu"``, or when no real GPU is usable.

    ``CUDA_VISIBLE_DEVICES``, when set, is respected: its entries are the ones dealt out.

    Example:
        >>> gpus_for_workers("cpu")
        []
    """
    if device is None or check_device(device) == "cpu" or simulator_enabled() or not _probe().usable:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v.strip() for v in visible.split(",") if v.strip()]
    try:
        return [str(i) for i in range(len(load_cuda().gpus))]
    except Exception:  # pragma: no cover - a driver that cannot list its devices
        return []


def check_device(device: Any) -> str:
    """A valid ``device`` option value (``None`` means ``"auto"``).

    Raises:
        OptionError: anything but ``"cpu"``, ``"gpu"``, ``"auto"`` or ``None``.
    """
    if device is None:
        return "auto"
    if not isinstance(device, str) or device.lower() not in DEVICES:
        raise OptionError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    return device.lower()


def resolve_device(device: Any, worth_it: bool = True) -> str:
    """The device a computation runs on: ``"cpu"`` or ``"gpu"``.

    Args:
        device: ``"cpu"``, ``"gpu"``, ``"auto"`` or ``None`` (auto).
        worth_it: for ``"auto"``: whether the problem is large enough for the GPU to pay (small
            jets stay on the CPU, where there is no launch or transfer cost).

    Returns:
        ``"gpu"`` for ``device="gpu"``, and for ``"auto"`` when a real GPU is usable (never the
        simulator) and ``worth_it``; else ``"cpu"``. Usable means that a tiny test kernel
        compiled and ran on it; where a GPU was found but that failed, ``"auto"`` says so in one
        line on stderr (once per process) and runs on the CPU.

    Raises:
        OptionError: an unknown device name.
        GpuUnavailableError: ``device="gpu"`` where no GPU can be used (says why, with the install
            hint).
    """
    device = check_device(device)
    if device == "cpu" or (device == "auto" and not worth_it):
        return "cpu"
    usable, _name, reason, found = _probe()
    if device == "gpu":
        if not usable:
            # the install hint only where numba's CUDA target is missing, not where it is
            # installed and finds no GPU
            hint = "" if INSTALL_HINT in reason or "is installed" in reason else (
                f"; {INSTALL_HINT}")
            raise GpuUnavailableError(f"device='gpu' asked for, but {reason}{hint}")
        return "gpu"
    if found and not usable:
        _say_cpu_fallback(reason)
    return "gpu" if usable and not simulator_enabled() else "cpu"
