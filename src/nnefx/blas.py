"""Which OpenBLAS kernels numpy uses, and an explicit way to choose them.

Why this matters: nnefx's fast convolutions and matrix products are numpy ``matmul`` calls,
i.e. OpenBLAS ``sgemm`` — 85–90 % of a ResNet run.  The OpenBLAS bundled with numpy is built
for many CPUs at once (``DYNAMIC_ARCH``) and picks its kernels once, when it is loaded (the
first ``import numpy``): from the ``OPENBLAS_CORETYPE`` environment variable if set, else from
the CPU's vendor/family/model table, else from a feature-based fallback.  The kernels matter:
on a 2-core AMD EPYC Zen 5 (family 0x1A, AVX-512) sgemm runs at about twice the speed with the
*SkylakeX* (AVX-512) kernels as with the *Haswell* (AVX2) ones (``benchmarks/blas.py``,
BENCHMARKS.md).

``import nnefx`` changes nothing in the process: it neither reads nor sets any variable.
The choice is the user's, made explicitly and before numpy is imported:

* set ``OPENBLAS_CORETYPE`` yourself (OpenBLAS's own variable; always wins);
* call :func:`configure` first thing in a program (``import nnefx.blas`` does not import
  numpy): ``configure("auto")`` names the SkylakeX kernels on CPUs OpenBLAS's table may not
  know (see :func:`decide`), ``configure("SkylakeX")`` (any core type name) forces one;
* on the command line, ``nnefx --blas auto run ...`` (or ``NNEFX_BLAS_CORETYPE=auto``, read by
  the ``nnefx`` command only) does the same for that command's process.

What ``auto`` does — it sets ``OPENBLAS_CORETYPE=SkylakeX`` only when all of these hold:

* numpy is not imported yet (afterwards the choice is fixed for the process; nothing done);
* ``OPENBLAS_CORETYPE`` is not set (whoever set it decided; their choice always wins);
* Linux on x86-64, and ``/proc/cpuinfo`` lists *every* AVX-512 subset the SkylakeX kernels
  execute (``avx512f avx512dq avx512cd avx512bw avx512vl``; the kernel lists them only when
  the OS saves the AVX-512 registers), so the named kernels cannot hit an illegal
  instruction;
* the CPU is one OpenBLAS's table does not know: AMD (``AuthenticAMD``) family ≥ 0x1A
  (missing up to OpenBLAS 0.3.31, whose feature fallback finds AVX-512 anyway; older
  releases sent unknown AMD families to pre-AVX kernels).  Older AVX-512 CPUs (Intel
  Skylake-X and later, AMD Zen 4) are in the table: left alone.

:func:`blas_info` / :func:`describe` (printed by ``nnefx run --profile``) report the kernels
in use, with a hint when an AVX-512 CPU runs AVX2 ones.  Nothing here raises on a CPU it
cannot read: any failure just means nothing is chosen.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from typing import Any

#: The AVX-512 subsets OpenBLAS's SkylakeX kernels use; all must be present.
SKYLAKEX_FLAGS = ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl")

#: First AMD family OpenBLAS (≤ 0.3.31) does not recognise (Zen 5).
AMD_FIRST_UNKNOWN_FAMILY = 0x1A

#: What :func:`configure` decided: (core type set or None, reason); "not run" until called.
DECISION: tuple[str | None, str] = (None, "not configured: OpenBLAS chose its kernels itself")

#: Words :func:`configure` and ``nnefx --blas`` take for "choose nothing".
OFF_WORDS = ("off", "0", "no", "none", "false")


def _cpu_fields(cpuinfo: str) -> tuple[str, int | None, set[str]]:
    """Vendor, family and flags of the first processor in a /proc/cpuinfo text."""
    vendor, family, flags = "", None, set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if vendor or flags:
                break  # end of the first processor block
            continue
        key = key.strip()
        value = value.strip()
        if key == "vendor_id" and not vendor:
            vendor = value
        elif key == "cpu family" and family is None:
            try:
                family = int(value)
            except ValueError:
                family = None
        elif key == "flags" and not flags:
            flags = set(value.split())
    return vendor, family, flags


def decide(cpuinfo: str, *, machine: str, system: str, env: Mapping[str, str],
           numpy_loaded: bool, wish: str = "auto") -> tuple[str | None, str]:
    """The core type to force (or None) and why; a pure function of its arguments.

    ``wish`` is what the caller asked for: ``auto`` (the rule in the module docstring), an
    OpenBLAS core type name (used as is), or ``off``.
    """
    wish = (wish or "auto").strip()
    if wish.lower() in OFF_WORDS:
        return None, f"disabled ({wish})"
    if numpy_loaded:
        return None, "numpy was imported first: OpenBLAS already chose its kernels"
    if env.get("OPENBLAS_CORETYPE"):
        return None, f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} set in the environment"
    if wish.lower() != "auto":
        if wish.isascii() and wish.isalnum() and len(wish) <= 32:
            return wish, f"asked for {wish}"
        return None, f"ignored {wish!r} (not a core type name)"
    if system != "Linux" or machine.lower() not in ("x86_64", "amd64"):
        return None, f"not x86-64 Linux ({system} {machine})"
    vendor, family, flags = _cpu_fields(cpuinfo)
    missing = [f for f in SKYLAKEX_FLAGS if f not in flags]
    if missing:
        return None, f"CPU lacks {', '.join(missing)}"
    if vendor != "AuthenticAMD" or family is None or family < AMD_FIRST_UNKNOWN_FAMILY:
        return None, f"CPU ({vendor or '?'} family {family if family is not None else '?'}) is recognised by OpenBLAS"
    return "SkylakeX", (f"AMD family {family:#x} with AVX-512 is not in OpenBLAS's CPU table "
                        "(up to 0.3.31): its AVX-512 kernels named instead of left to its fallback")


def _read_cpuinfo() -> str:
    """The text of /proc/cpuinfo (at most 1 MiB), or "" where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def configure(coretype: str = "auto") -> tuple[str | None, str]:
    """Choose OpenBLAS's kernels for this process: call it before anything imports numpy.

    ``coretype`` is ``"auto"`` (name the SkylakeX kernels on AVX-512 CPUs OpenBLAS's table
    lacks; see the module docstring), an OpenBLAS core type name such as ``"SkylakeX"`` or
    ``"Haswell"``, or ``"off"``.  Sets ``OPENBLAS_CORETYPE`` when it decides on one — never
    when the variable is already set or numpy is already loaded (OpenBLAS has chosen then).
    Returns (core type set or None, reason), also kept in :data:`DECISION` for
    :func:`describe`.  Never raises.
    """
    global DECISION
    try:
        chosen, reason = decide(_read_cpuinfo(), machine=platform.machine(), system=platform.system(),
                                env=os.environ, numpy_loaded="numpy" in sys.modules, wish=coretype)
        if chosen is not None:
            os.environ["OPENBLAS_CORETYPE"] = chosen
        DECISION = (chosen, reason)
    except Exception as exc:  # pragma: no cover - defensive: choosing kernels must not fail a program
        DECISION = (None, f"selection failed: {type(exc).__name__}")
    return DECISION


#: OpenBLAS core names whose kernels use AVX-512 (lower case, as threadpoolctl reports them).
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")


def _cpu_has_avx512() -> bool:
    flags = _cpu_fields(_read_cpuinfo())[2]
    return all(flag in flags for flag in SKYLAKEX_FLAGS)


def blas_info() -> dict[str, Any]:
    """What nnefx chose for OpenBLAS and, if ``threadpoolctl`` is installed, what is in use.

    Keys: ``chosen`` (core type :func:`configure` set, or None), ``reason``, ``forced`` (the
    ``OPENBLAS_CORETYPE`` in effect, or None) and, when threadpoolctl can see the library,
    ``library``, ``version``, ``architecture`` (the kernels OpenBLAS runs) and ``threads``;
    ``hint`` when the kernels in use are not AVX-512 ones although the CPU has AVX-512.
    """
    chosen, reason = DECISION
    info: dict[str, Any] = {"chosen": chosen, "reason": reason,
                            "forced": os.environ.get("OPENBLAS_CORETYPE") or None}
    try:
        import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
        from threadpoolctl import threadpool_info

        for entry in threadpool_info():
            if entry.get("user_api") == "blas":
                info.update(library=entry.get("internal_api"), version=entry.get("version"),
                            architecture=entry.get("architecture"), threads=entry.get("num_threads"))
                break
    except Exception:
        pass
    arch = str(info.get("architecture") or "")
    if (info.get("library") == "openblas" and arch and arch.lower() not in AVX512_CORES
            and _cpu_has_avx512()):
        how = (f"OPENBLAS_CORETYPE={info['forced']} forces them" if info["forced"]
               else "OpenBLAS chose them")
        info["hint"] = (f"this CPU has AVX-512 but OpenBLAS runs its {arch} kernels ({how}); "
                        "OPENBLAS_CORETYPE=SkylakeX (or nnefx.blas.configure() / nnefx --blas auto), set "
                        "before numpy is imported, runs matrix products faster (about 2x on AMD Zen 5)")
    return info


def describe() -> str:
    """One line for ``nnefx run --profile``: the BLAS kernels in use and why."""
    info = blas_info()
    parts = []
    if info.get("library"):
        parts.append(f"{info['library']} {info.get('version') or ''}".strip())
        if info.get("architecture"):
            parts.append(f"kernels {info['architecture']}")
        if info.get("threads"):
            parts.append(f"{info['threads']} threads")
    chosen = info["chosen"]
    choice = (f"nnefx set OPENBLAS_CORETYPE={chosen} ({info['reason']})" if chosen
              else f"nnefx set nothing ({info['reason']})")
    line = "blas: " + (", ".join(parts) + "; " if parts else "") + choice
    if info.get("hint"):
        line += f"\nhint: {info['hint']}"
    return line
