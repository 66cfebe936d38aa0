"""nnefx.blas: the explicit OpenBLAS kernel choice (pure decision + real processes); `import nnefx`
alone changes nothing in the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nnefx import blas as _blas

AVX512 = "avx512f avx512dq avx512cd avx512bw avx512vl"


def cpuinfo(vendor: str = "AuthenticAMD", family: int = 26, flags: str = f"fpu sse avx avx2 fma {AVX512}") -> str:
    block = (f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 2\n"
             f"model name\t: Some CPU\nflags\t\t: {flags}\n")
    # Two processor blocks, the second one different: only the first is read.
    return block + "\n" + block.replace(vendor, "GenuineIntel").replace(f": {family}\n", ": 6\n")


def decide(text: str, *, machine: str = "x86_64", system: str = "Linux", env: dict | None = None,
           numpy_loaded: bool = False, wish: str = "auto") -> tuple[str | None, str]:
    return _blas.decide(text, machine=machine, system=system, env=env or {}, numpy_loaded=numpy_loaded,
                        wish=wish)


def test_zen5_with_avx512_gets_skylakex():
    choice, reason = decide(cpuinfo())
    assert choice == "SkylakeX"
    assert "0x1a" in reason


def test_later_amd_families_too():
    assert decide(cpuinfo(family=27))[0] == "SkylakeX"


@pytest.mark.parametrize("family", [23, 25])  # Zen 2, Zen 4: in OpenBLAS's table
def test_known_amd_families_left_alone(family):
    choice, reason = decide(cpuinfo(family=family))
    assert choice is None and "recognised" in reason


def test_intel_left_alone():
    assert decide(cpuinfo(vendor="GenuineIntel", family=6))[0] is None


@pytest.mark.parametrize("missing", AVX512.split())
def test_every_avx512_subset_is_required(missing):
    flags = " ".join(f for f in f"avx avx2 {AVX512}".split() if f != missing)
    choice, reason = decide(cpuinfo(flags=flags))
    assert choice is None and missing in reason


def test_flag_names_match_whole_words():
    # "avx512fp16" must not count as "avx512f"
    flags = "avx2 avx512fp16 avx512dq avx512cd avx512bw avx512vl"
    assert decide(cpuinfo(flags=flags))[0] is None


def test_users_coretype_wins():
    choice, reason = decide(cpuinfo(), env={"OPENBLAS_CORETYPE": "Haswell"})
    assert choice is None and "Haswell" in reason


def test_too_late_once_numpy_is_loaded():
    choice, reason = decide(cpuinfo(), numpy_loaded=True)
    assert choice is None and "numpy" in reason


@pytest.mark.parametrize("value", ["off", "OFF", "0", "none"])
def test_opt_out(value):
    assert decide(cpuinfo(), wish=value)[0] is None


def test_explicit_name_is_used_as_given():
    assert decide(cpuinfo(vendor="GenuineIntel", family=6), wish="Zen")[0] == "Zen"
    assert decide(cpuinfo(), wish="auto")[0] == "SkylakeX"


@pytest.mark.parametrize("value", ["Sky lake", "a;b", "x" * 40, "Zen\n"])
def test_odd_names_are_ignored(value):
    choice, _ = decide(cpuinfo(), wish=value)
    assert choice in (None, "Zen")  # "Zen\n" is stripped to a valid name
    if value != "Zen\n":
        assert choice is None


@pytest.mark.parametrize("machine,system", [("aarch64", "Linux"), ("x86_64", "Darwin"), ("AMD64", "Windows")])
def test_only_x86_64_linux(machine, system):
    assert decide(cpuinfo(), machine=machine, system=system)[0] is None


@pytest.mark.parametrize("text", ["", "garbage", "cpu family\t: x\nflags: avx512f", ":::\n\n::"])
def test_unreadable_cpuinfo_chooses_nothing(text):
    assert decide(text)[0] is None


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NNEFX_BLAS_CORETYPE")}


def _run(code: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env or _clean_env(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_import_nnefx_changes_nothing():
    """``import nnefx`` (and the command-line module) neither sets a variable nor loads numpy."""
    code = ("import json, os, sys\nbefore = dict(os.environ)\nimport nnefx, nnefx.cli, nnefx.blas\n"
            "print(json.dumps({'same': dict(os.environ) == before, 'numpy': 'numpy' in sys.modules,"
            " 'decision': nnefx.blas.DECISION[0]}))")
    assert json.loads(_run(code)) == {"same": True, "numpy": False, "decision": None}


def test_configure_before_numpy_in_a_fresh_process():
    """On this machine: configure("auto") decides as :func:`decide` says, sets the variable to
    that, and the BLAS then loads and multiplies right."""
    code = (
        "import json, os, platform\n"
        "from nnefx import blas\n"
        "chosen, _ = blas.configure('auto')\n"
        "import numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((67, 129)).astype(np.float32)\n"
        "b = rng.standard_normal((129, 45)).astype(np.float32)\n"
        "err = float(np.abs(a @ b - (a.astype(np.float64) @ b.astype(np.float64))).max())\n"
        "text = open('/proc/cpuinfo').read() if os.path.exists('/proc/cpuinfo') else ''\n"
        "expect = blas.decide(text, machine=platform.machine(), system=platform.system(), env={}, "
        "numpy_loaded=False)[0]\n"
        "print(json.dumps({'err': err, 'chosen': chosen, 'expect': expect,"
        " 'env': os.environ.get('OPENBLAS_CORETYPE'), 'describe': blas.describe()}))\n"
    )
    result = json.loads(_run(code))
    assert result["err"] < 1e-3
    assert result["chosen"] == result["expect"]
    assert result["env"] == result["chosen"]
    assert result["describe"].startswith("blas: ")


def test_configure_names_a_core_type_and_respects_the_users():
    code = ("import os\nfrom nnefx import blas\nprint(blas.configure('Haswell')[0], os.environ.get('OPENBLAS_CORETYPE'))")
    assert _run(code).split() == ["Haswell", "Haswell"]
    env = dict(_clean_env(), OPENBLAS_CORETYPE="Prescott")
    assert _run(code, env).split() == ["None", "Prescott"]


def test_configure_after_numpy_changes_nothing():
    code = ("import numpy, os\nfrom nnefx import blas\n"
            "print(blas.configure('auto')[0], os.environ.get('OPENBLAS_CORETYPE'))\n")
    assert _run(code).split() == ["None", "None"]


def test_cli_flag_and_variable_choose_for_the_command():
    """``nnefx --blas NAME`` (or NNEFX_BLAS_CORETYPE) sets the variable before the command runs;
    without either the command sets nothing."""
    code = ("import os, sys\nfrom nnefx import cli\n"
            "cli.main(sys.argv[1:] + ['check', '/nonexistent.nnef'])\n"
            "print(os.environ.get('OPENBLAS_CORETYPE'))")
    def cli(*args: str, env: dict | None = None) -> str:
        out = subprocess.run([sys.executable, "-c", code, *args], env=env or _clean_env(), capture_output=True,
                             text=True, timeout=120)
        return out.stdout.strip().splitlines()[-1]
    assert cli() == "None"
    assert cli("--blas", "Haswell") == "Haswell"
    assert cli(env=dict(_clean_env(), NNEFX_BLAS_CORETYPE="Haswell")) == "Haswell"


def test_blas_info_keys():
    info = _blas.blas_info()
    assert {"chosen", "reason", "forced"} <= set(info)
