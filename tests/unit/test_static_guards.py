"""Static guards on small snippets: each must fire on its pattern and stay quiet on clean code."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from klineage.gate.static_guards import check_static

CLEAN = """
import torch, triton, triton.language as tl
import torch.nn as nn

@triton.jit
def _k(x_ptr, BLOCK: tl.constexpr):
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x).view(-1)
        _k[(1,)](y, BLOCK=16)
        return y.reshape(x.shape)
"""


def guards(src: str) -> list[str]:
    return [v.guard for v in check_static(ast.parse(textwrap.dedent(src)))]


def test_clean_candidate_has_no_violation() -> None:
    assert guards(CLEAN) == []


@pytest.mark.parametrize(
    ("edit", "guard"),
    [
        (("@triton.jit\n", ""), "launches_triton"),
        (
            (
                "        return y.reshape(x.shape)",
                "        try:\n            return y\n        except Exception:\n            return x",
            ),
            "no_try_except",
        ),
        (
            (
                "        return y.reshape(x.shape)",
                "        with contextlib.suppress(Exception):\n            return y",
            ),
            "no_try_except",
        ),
        (("class ModelNew(nn.Module):", "class ModelNew(Model):"), "no_reference_model"),
        (("        return y.reshape(x.shape)", "        return Model()(x)"), "no_reference_model"),
        (
            ("import torch.nn as nn", "import torch.nn as nn\nfrom problem import Model"),
            "no_reference_model",
        ),
        (
            ("        return y.reshape(x.shape)", "        return torch.softmax(x, -1)"),
            "no_torch_compute",
        ),
        (("        return y.reshape(x.shape)", "        return F.gelu(x)"), "no_torch_compute"),
        (
            ("        return y.reshape(x.shape)", "        return torch.compile(lambda t: t)(y)"),
            "no_side_effects",
        ),
        (
            (
                "        y = torch.empty_like",
                "        s = torch.cuda.Stream()\n        y = torch.empty_like",
            ),
            "no_side_effects",
        ),
    ],
)
def test_each_guard_fires(edit: tuple[str, str], guard: str) -> None:
    old, new = edit
    assert old in CLEAN
    assert guard in guards(CLEAN.replace(old, new))


def test_violation_names_the_line() -> None:
    src = CLEAN.replace("        return y.reshape(x.shape)", "        return torch.exp(x)")
    (v,) = check_static(ast.parse(src))
    assert v.line == src.splitlines().index("        return torch.exp(x)") + 1
    assert v.render("cand.py").startswith(f"cand.py:{v.line}: [no_torch_compute] torch.exp()")


def test_allocation_calls_in_forward_are_allowed() -> None:
    src = CLEAN.replace(
        "y = torch.empty_like(x).view(-1)",
        "y = torch.zeros(4, dtype=torch.float32); z = torch.empty((2, 2))",
    )
    assert guards(src) == []


# --- the shipped corpus: every legitimate kernel passes every static guard -----------------

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    p
    for pattern in ("expert.py", "naive.py", "candidate.py")
    for p in (ROOT / "src" / "klineage").glob(f"**/{pattern}")
)
# A GPU cheat that only runs with the static guards off (it blinds the monitors through gc).
GPU_STATIC_CHEATS = ("pause_counter.py",)
# Legitimate kernels the test suites gate (the GPU ones fail at run time, never statically).
TEST_KERNELS = sorted(
    p
    for folder in ("tests/interp/kernels", "tests/interp/unseen", "tests/gpu/candidates")
    for p in (ROOT / folder).glob("*.py")
    if p.name != "__init__.py" and p.name not in GPU_STATIC_CHEATS
)
# Adversarial files the static guards caught before these rules were added: still caught.
STATICALLY_REJECTED = ("calls_reference", "torch_compute_in_forward", "try_except")


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def test_the_corpus_globs_find_the_kernels() -> None:
    assert len(SHIPPED) >= 30 and len(TEST_KERNELS) >= 15
    assert {p.name for p in SHIPPED} == {"expert.py", "naive.py", "candidate.py"}


@pytest.mark.parametrize("path", SHIPPED + TEST_KERNELS, ids=_rel)
def test_legitimate_kernel_passes_every_static_guard(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert [v.render(path.name) for v in check_static(tree)] == []


@pytest.mark.parametrize("name", STATICALLY_REJECTED)
def test_adversarial_candidate_still_fails_the_static_guards(name: str) -> None:
    path = ROOT / "tests" / "interp" / "candidates" / f"{name}.py"
    assert check_static(ast.parse(path.read_text(encoding="utf-8")))


# --- inline sources for each new rule: the legitimate form passes, the cheat names its line ---

CHEAT = "# <- cheat"


def _with(snippet: str) -> str:
    return CLEAN + textwrap.dedent(snippet)


def assert_clean(snippet: str) -> None:
    src = _with(snippet)
    assert [v.render("cand.py") for v in check_static(ast.parse(src))] == []


def assert_caught(snippet: str, guard: str, words: str) -> None:
    """The line marked CHEAT carries a `guard` violation whose message contains `words`."""
    src = _with(snippet)
    (line,) = [i for i, text in enumerate(src.splitlines(), 1) if CHEAT in text]
    found = check_static(ast.parse(src))
    hits = [v for v in found if v.guard == guard and v.line == line and words in v.message]
    assert hits, [v.render("cand.py") for v in found]
    assert hits[0].render("cand.py").startswith(f"cand.py:{line}: [{guard}] ")


@pytest.mark.parametrize(
    "snippet",
    [
        "import math, functools, itertools, operator, collections.abc, dataclasses, enum, abc\n",
        "import numbers, warnings, typing, typing_extensions\nfrom typing import Any\n",
        "import torch.nn.functional as F\nfrom torch import nn\nfrom torch.autograd import Function\n",
        "from triton.language.extra import libdevice\nfrom triton.runtime.errors import OutOfResources\n",
        "import liger_kernel\nfrom liger_kernel.ops.softmax import LigerSoftmaxFunction\n",
        # src/klineage/kernels/matmul/expert.py: keeps the TMA path off under the interpreter.
        "import os\nINTERP = os.environ.get('TRITON_INTERPRET', '0') == '1'\n",
    ],
)
def test_imports_allowed(snippet: str) -> None:
    assert_clean(snippet)


@pytest.mark.parametrize(
    ("snippet", "words"),
    [
        ("import ctypes  # <- cheat\n", "imports ctypes"),
        ("import sys  # <- cheat\n", "imports sys"),
        ("import numpy as np  # <- cheat\n", "imports numpy"),
        ("import importlib  # <- cheat\n", "imports importlib"),
        ("from subprocess import run  # <- cheat\n", "imports subprocess"),
        ("import gc, inspect  # <- cheat\n", "imports gc"),
        ("import _thread  # <- cheat\n", "imports _thread"),
        ("import threading  # <- cheat\n", "imports threading"),
        ("import builtins  # <- cheat\n", "imports builtins"),
        ("import pickle  # <- cheat\n", "imports pickle"),
        ("from concurrent import futures  # <- cheat\n", "imports concurrent"),
        ("import torch.multiprocessing as mp  # <- cheat\n", "torch.multiprocessing"),
        ("import torch.library  # <- cheat\n", "torch.library"),
        ("import torch.utils.cpp_extension  # <- cheat\n", "torch.utils.cpp_extension"),
        ("import torch._dynamo  # <- cheat\n", "private module torch._dynamo"),
        ("from torch import _C  # <- cheat\n", "private module torch._C"),
        ("from torch.utils._python_dispatch import TorchDispatchMode  # <- cheat\n", "private"),
        ("from torch.jit import script  # <- cheat\n", "torch.jit"),
        ("from torch import compiler  # <- cheat\n", "torch.compiler"),
        ("from . import helper  # <- cheat\n", "relative import"),
        ("from .helper import k  # <- cheat\n", "relative import from .helper"),
        ("from triton.language import *  # <- cheat\n", "import *"),
        ("import os\nos._exit(3)  # <- cheat\n", "uses os._exit"),
        ("import os\nos.environ['TRITON_INTERPRET'] = '1'  # <- cheat\n", "uses os.environ"),
        ("import os\nH = os.environ.get('HOME')  # <- cheat\n", "uses os.environ"),
        ("from os import environ  # <- cheat\n", "imports os"),
        ("def f():\n    import signal  # <- cheat\n", "imports signal"),
    ],
)
def test_imports_rejected(snippet: str, words: str) -> None:
    assert_caught(snippet, "imports", words)


@pytest.mark.parametrize(
    "snippet",
    [
        "def f(input, compile=None):\n    return input, compile\n",  # parameters, not builtins
        # src/klineage/kernels/matmul/expert.py: the TMA alignment check reads the address.
        "def aligned(t):\n    return t.data_ptr() % 16 == 0\n",
        "HAS_DESC = hasattr(tl, 'make_tensor_descriptor') and hasattr(triton, 'set_allocator')\n",
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self._cache = {}\n    def get(self):\n        return self._cache.get(1)\n",
        "class M2(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n",
        "def cap(x):\n    return torch.cuda.get_device_capability(x.device)[0] >= 9\n",
        "V = torch.__version__\n",
    ],
)
def test_introspection_legitimate_forms(snippet: str) -> None:
    assert_clean(snippet)


@pytest.mark.parametrize(
    ("snippet", "words"),
    [
        ("y = eval('1')  # <- cheat\n", "uses eval"),
        ("exec('y = 1')  # <- cheat\n", "uses exec"),
        ("c = compile('1', 'f', 'eval')  # <- cheat\n", "uses compile"),
        ("m = __import__('os')  # <- cheat\n", "uses __import__"),
        ("g = globals()  # <- cheat\n", "uses globals"),
        ("def f(x):\n    return vars(x)  # <- cheat\n", "uses vars"),
        ("def f():\n    return getattr(nn, 'Module')  # <- cheat\n", "uses getattr"),
        ("setattr(nn, 'x', 1)  # <- cheat\n", "uses setattr"),
        ("f = open('/etc/passwd')  # <- cheat\n", "uses open"),
        ("breakpoint()  # <- cheat\n", "uses breakpoint"),
        ("b = memoryview(b'')  # <- cheat\n", "uses memoryview"),
        # a module-level binding may not run (if False:), so it does not shadow the builtin
        ("if False:\n    getattr = None\nC = getattr(nn, 'x')  # <- cheat\n", "uses getattr"),
        ("def f():\n    [0 for open in ()]\n    return open('f')  # <- cheat\n", "uses open"),
        ("s = ().__class__  # <- cheat\n", "__class__"),
        ("s = object.__subclasses__()  # <- cheat\n", "__subclasses__"),
        ("def f(fn):\n    return fn.__globals__  # <- cheat\n", "__globals__"),
        ("b = __builtins__  # <- cheat\n", "__builtins__"),
        ("def f(x):\n    return x.__dict__  # <- cheat\n", "__dict__"),
        ("def f(fn):\n    return fn.__code__  # <- cheat\n", "__code__"),
        ("p = print.__self__  # <- cheat\n", "__self__"),
        ("def f(g):\n    return g.gi_frame.f_back  # <- cheat\n", "gi_frame"),
        ("def f(e):\n    return e.__traceback__.tb_frame  # <- cheat\n", "__traceback__"),
        (
            "class W:\n    def __torch_function__(self, *a):  # <- cheat\n        pass\n",
            "__torch_function__",
        ),
        ("s = torch._C  # <- cheat\n", "private torch._C"),
        ("s = triton.runtime._allocation  # <- cheat\n", "private triton.runtime._allocation"),
        ("def f(x):\n    return x._typed_storage()  # <- cheat\n", "private attribute"),
        ("def f(x):\n    return x.cpu().numpy()  # <- cheat\n", ".numpy"),
        ("def f(x):\n    return x.tolist()  # <- cheat\n", ".tolist"),
        ("def f(x):\n    return x.untyped_storage()  # <- cheat\n", ".untyped_storage"),
        ("def f(x):\n    return x.storage()  # <- cheat\n", ".storage"),
        ("def f(x):\n    return x.__dlpack__()  # <- cheat\n", "__dlpack__"),
        ("def f(x):\n    return x.__array__()  # <- cheat\n", "__array__"),
        ("class T(torch.Tensor):  # <- cheat\n    pass\n", "subclasses torch.Tensor"),
        ("from torch import Tensor\nclass T(Tensor):  # <- cheat\n    pass\n", "subclasses"),
        ("class P(nn.Parameter):  # <- cheat\n    pass\n", "subclasses torch.nn.Parameter"),
        ("lib = torch.library.Library('aten', 'IMPL')  # <- cheat\n", "torch.library"),
        ("def f(x):\n    return torch.ops.aten.softmax(x, 0)  # <- cheat\n", "torch.ops"),
        ("import torch as th\nk = th.compile  # <- cheat\n", "torch.compile"),
        ("k = torch.jit.load  # <- cheat\n", "torch.jit"),
        ("q = torch.multiprocessing.Queue  # <- cheat\n", "torch.multiprocessing"),
        ("torch.manual_seed(0)  # <- cheat\n", "torch.manual_seed"),
        ("torch.allclose = lambda *a, **k: True  # <- cheat\n", "assigns torch.allclose"),
        ("torch.backends.cuda.matmul.allow_tf32 = True  # <- cheat\n", "assigns torch.backends"),
        ("def f():\n    torch.os._exit(0)  # <- cheat\n", "os module through an attribute"),
        ("import typing\nS = typing.sys  # <- cheat\n", "sys module through an attribute"),
        ("T = torch  # <- cheat\nk = T.ops\n", "module torch as a value"),
        ("import operator\nf = operator.attrgetter('_C')  # <- cheat\n", "getattr by another name"),
        ("T = type('T', (torch.Tensor,), {})  # <- cheat\n", "type(name, bases, dict)"),
    ],
)
def test_introspection_rejected(snippet: str, words: str) -> None:
    assert_caught(snippet, "no_introspection", words)


def test_memory_attributes_inside_a_kernel_are_not_host_reads() -> None:
    """The host-memory rule is about host code; a @triton.jit body has no tensor storage."""
    assert_clean("@triton.jit\ndef _k2(p, n):\n    x = tl.load(p)\n    y = x.storage\n")


JIT_LEGIT = """
import triton.language as lang
from triton import language as tlang, jit
from triton.language import constexpr
from triton.language.extra import libdevice
from triton.language.extra.cuda.libdevice import rsqrt
from liger_kernel.ops.swiglu import silu
import math

C: tl.constexpr = tl.constexpr(3)
D = 2.0 * C

@triton.jit
def _helper(x):
    return x * 2

@triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 16 == 0})
@triton.jit(do_not_specialize=["n"])
def _k2(x_ptr, n, BLOCK: constexpr, EVEN: tl.constexpr):
    offs = lang.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    for i in tl.static_range(2):
        x = _helper(x) + libdevice.tanh(x) + rsqrt(x) * math.pi * D
    for j in range(min(2, max(1, len((1, 2))))):
        x = silu(x).cast(tlang.float32) + abs(float(int(bool(j))))
    y = tl.where(offs < n, x, -float("inf")).to(x_ptr.dtype.element_ty)
    if isinstance(C, tl.constexpr):
        print("ok", tuple(list(zip(enumerate((1,)), (2,)))))
    tl.store(x_ptr + offs, tl.reduce(y, 0, _helper2), mask=offs < n)

@jit
def _helper2(a, b):
    return a + b
"""


def test_jit_legitimate_forms() -> None:
    assert_clean(JIT_LEGIT)


@pytest.mark.parametrize(
    ("snippet", "words"),
    [
        (
            "import math\n@triton.jit\ndef _k2(x):\n    y = math.exp(x)  # <- cheat\n",
            "calls plain Python math.exp() from the @triton.jit body of _k2 (runs on the host",
        ),
        (
            "def plain(x):\n    return x\n@triton.jit\ndef _k2(x):\n    y = plain(x)  # <- cheat\n",
            "calls plain Python plain() from the @triton.jit body of _k2",
        ),
        ("@triton.jit\ndef _k2(x):\n    y = torch.exp(x)  # <- cheat\n", "torch.exp()"),
        ("@triton.jit\ndef _k2(x):\n    y = sorted(x)  # <- cheat\n", "sorted()"),
        ("@triton.jit\ndef _k2(x, FN: tl.constexpr):\n    y = FN(x)  # <- cheat\n", "FN()"),
        ("@triton.jit\ndef _k2(x):\n    y = _k.fn(x)  # <- cheat\n", "_k.fn()"),
        (
            "from triton import jit\ndef p(x):\n    return x\n@jit\ndef _k2(x):\n"
            "    y = p(x)  # <- cheat\n",
            "p() from the @triton.jit body of _k2",
        ),
        (
            "def p(x):\n    return x\n@triton.autotune(configs=[], key=[])\n"
            "@triton.jit(do_not_specialize=['x'])\ndef _k2(x):\n    y = p(x)  # <- cheat\n",
            "p()",
        ),
        (
            "import math\n@triton.jit\ndef _k2(x):\n    f = math.exp  # <- cheat\n"
            "    y = f.__call__(x)\n",
            "uses the host module math",
        ),
        (
            "F = torch.softmax\n@triton.jit\ndef _k2(x):\n    y = F  # <- cheat\n",
            "uses the host global F",
        ),
        (
            "def comb(a, b):\n    return a + b\n@triton.jit\ndef _k2(x):\n"
            "    y = tl.reduce(x, 0, comb)  # <- cheat\n",
            "uses the plain Python comb",
        ),
        (  # rebinding the triton.language alias to a host module
            "import math\ntl = math\n@triton.jit\ndef _k2(x):\n    y = tl.exp(x)  # <- cheat\n",
            "calls plain Python tl.exp()",
        ),
        (  # a kernel wrapped as triton.jit(fn) is checked like a decorated one
            "def _p(x):\n    y = torch.exp(x)  # <- cheat\n_k3 = triton.jit(_p)\n",
            "torch.exp() from the @triton.jit body of _p",
        ),
    ],
)
def test_jit_rejected(snippet: str, words: str) -> None:
    assert_caught(snippet, "no_python_in_jit", words)


LIGER_OPTIONAL_IMPORT = """
import operator
if operator.ge(3, 2):
    try:
        # typical import path with dispatch available
        from triton.language.extra.libdevice import rsqrt
    except ModuleNotFoundError:
        # for working with NGC containers
        from triton.language.extra.cuda.libdevice import rsqrt
else:
    from triton.language.math import rsqrt
try:
    import torch.distributed.tensor
except ImportError:
    pass
"""


@pytest.mark.parametrize(
    "snippet",
    [
        LIGER_OPTIONAL_IMPORT,
        "try:\n    import liger_kernel\nexcept (ImportError, ModuleNotFoundError):\n"
        "    liger_kernel = None\n",
        "def f():\n    try:\n        from triton.language.extra import libdevice\n"
        "    except ImportError as e:\n        from triton.language import math as libdevice\n"
        "    return libdevice.exp\n",
        # Liger-Kernel's rms_norm.py: an import-time default for a name the import binds.
        "try:\n    from torch.distributed.tensor import DTensor as _DTensor\n"
        "except Exception:\n    _DTensor = ()\n",
    ],
)
def test_optional_import_is_not_a_try_except_violation(snippet: str) -> None:
    assert_clean(snippet)


# A fallback around computation: in a launcher, in forward, or after an import, however caught.
LAUNCHER = """
def _launch(x):
    y = torch.empty_like(x)
{}
    return y
"""


@pytest.mark.parametrize(
    "body",
    [
        "    try:  # <- cheat\n        _k[(1,)](y, BLOCK=16)\n    except Exception:\n"
        "        return torch.softmax(x, -1)",
        "    try:  # <- cheat\n        _k[(1,)](y, BLOCK=16)\n    except RuntimeError:\n"
        "        y = torch.softmax(x, -1)",
        # an ImportError handler is no licence when the body computes
        "    try:  # <- cheat\n        from liger_kernel.ops.softmax import LigerSoftmaxFunction\n"
        "        y = LigerSoftmaxFunction.apply(x)\n    except ImportError:\n        pass",
        "    with contextlib.suppress(Exception):  # <- cheat\n        _k[(1,)](y, BLOCK=16)",
        "    with suppress(RuntimeError):  # <- cheat\n        _k[(1,)](y, BLOCK=16)",
    ],
)
def test_a_fallback_in_a_launcher_is_rejected(body: str) -> None:
    assert_caught(LAUNCHER.format(body), "no_try_except", "")


@pytest.mark.parametrize(
    "edit",
    [
        "        try:  # <- cheat\n            _k[(1,)](y, BLOCK=16)\n"
        "        except ImportError:\n            return x\n",
        "        with contextlib.suppress(RuntimeError):  # <- cheat\n"
        "            _k[(1,)](y, BLOCK=16)\n",
    ],
)
def test_a_fallback_around_the_launch_in_forward_is_rejected(edit: str) -> None:
    src = CLEAN.replace("        _k[(1,)](y, BLOCK=16)\n", edit)
    assert src != CLEAN
    (line,) = [i for i, text in enumerate(src.splitlines(), 1) if CHEAT in text]
    assert any(v.guard == "no_try_except" and v.line == line for v in check_static(ast.parse(src)))


@pytest.mark.parametrize(
    ("snippet", "words"),
    [
        ("try:  # <- cheat\n    import liger_kernel\nexcept Exception:\n    pass\n", "try/except"),
        ("try:  # <- cheat\n    import liger_kernel\nexcept:\n    pass\n", "try/except"),
        (
            "try:  # <- cheat\n    import liger_kernel\nexcept ImportError:\n"
            "    Y = torch.softmax(torch.ones(2), 0)\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    import liger_kernel\n    Y = torch.ones(2)\n"
            "except ImportError:\n    pass\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    import liger_kernel\nexcept ImportError:\n    pass\n"
            "finally:\n    pass\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    import liger_kernel\nexcept ImportError:\n    pass\n"
            "else:\n    Y = torch.ones(2)\n",
            "try/except",
        ),
        (
            "ImportError = Exception\ntry:  # <- cheat\n    import liger_kernel\n"
            "except ImportError:\n    pass\n",
            "try/except",
        ),
        (
            "from contextlib import suppress\nwith suppress(Exception):  # <- cheat\n    pass\n",
            "suppress",
        ),
        # `except Exception` is an import-time default only when it binds what the try imports,
        # to constants, at module level, with Exception not rebound.
        (
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "except Exception:\n    _Other = ()\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "except Exception as e:\n    _DTensor = ()\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "except BaseException:\n    _DTensor = ()\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "except Exception:\n    from torch import Tensor as _DTensor\n",
            "try/except",
        ),
        (
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "    _n = _DTensor.__name__\nexcept Exception:\n    _DTensor = ()\n",
            "try/except",
        ),
        (
            "Exception = BaseException\n"
            "try:  # <- cheat\n    from torch.distributed.tensor import DTensor as _DTensor\n"
            "except Exception:\n    _DTensor = ()\n",
            "try/except",
        ),
        (
            "def _f():\n"
            "    try:  # <- cheat\n        from torch.distributed.tensor import DTensor as _D\n"
            "    except Exception:\n        _D = ()\n    return _D\n",
            "try/except",
        ),
        (
            "class S:\n    def __exit__(self, *a):  # <- cheat\n        return True\n",
            "defines __exit__",
        ),
    ],
)
def test_other_try_except_forms_are_still_rejected(snippet: str, words: str) -> None:
    assert_caught(snippet, "no_try_except", words)


def test_an_import_inside_an_optional_import_is_still_checked() -> None:
    assert_caught(
        "try:\n    import ctypes  # <- cheat\nexcept ImportError:\n    pass\n",
        "imports",
        "imports ctypes",
    )
