"""What the static guards allow and refuse: the tables each guard reads, with why."""

from __future__ import annotations

# torch.* calls a forward may make: allocation, views/reshapes, layout and dtype plumbing,
# and queries. Everything else computes, and computing is the Triton kernels' job.
ALLOWED_TORCH_CALLS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
        "tensor",
        "as_strided",
        "broadcast_shapes",
        "Size",
        "device",
        "dtype",
        "finfo",
        "iinfo",
        "is_tensor",
        "is_floating_point",
        "get_device",
        "reshape",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "narrow",
        "select",
        "chunk",
        "split",
        "unbind",
        "movedim",
        "view_as_real",
        "view_as_complex",
        "promote_types",
        "result_type",
        "set_grad_enabled",
        "no_grad",
        "inference_mode",
    }
)


# Installed Triton kernel libraries a candidate may import (and call into from a kernel).
KERNEL_LIBRARIES = ("liger_kernel",)

# Top-level modules a candidate may import: the two it is written in, plus pure-Python stdlib
# helpers that reach neither the process, the interpreter's internals nor tensor memory.
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "triton",
        "math",
        "typing",
        "typing_extensions",
        "functools",
        "itertools",
        "operator",
        "collections",
        "dataclasses",
        "enum",
        "abc",
        "numbers",
        "__future__",
        "warnings",
    }
)

# torch modules that register ops, compile other code, load pickles or start processes
# (torch._* and every other private module are refused too).
DENIED_TORCH_MODULES = (
    "torch.library",
    "torch.multiprocessing",
    "torch.utils.cpp_extension",
    "torch.jit",
    "torch.compiler",
    "torch.hub",
    "torch.package",
    "torch.serialization",
    "torch.utils.dlpack",
    "torch.cuda.jiterator",
)

# `import os` is allowed for exactly one thing: os.environ.get(<one of these>, <constant>).
# src/klineage/kernels/matmul/expert.py and tests/interp/unseen/tma_descriptors_softmax.py need
# it to keep the TMA path off under the CPU interpreter.
ALLOWED_ENV_READS = frozenset({"TRITON_INTERPRET"})

# Builtins that hand out code execution, frames, files or dynamic attribute access.
BANNED_BUILTINS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "open",
        "input",
        "memoryview",
        "exit",
        "quit",
    }
)

# Attribute or name uses that escape to interpreter internals (class graphs, frames, globals,
# builtins, pickling hooks, tensor-subclass and mode hooks).
DUNDER_ESCAPES = frozenset(
    {
        "__class__",
        "__subclasses__",
        "__bases__",
        "__base__",
        "__mro__",
        "__globals__",
        "__builtins__",
        "__dict__",
        "__code__",
        "__closure__",
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__reduce__",
        "__reduce_ex__",
        "__torch_dispatch__",
        "__torch_function__",
        "__self__",
        "__func__",
        "__wrapped__",
        "__defaults__",
        "__kwdefaults__",
        "__loader__",
        "__spec__",
        "__traceback__",
        "__del__",
        "f_back",
        "f_globals",
        "f_locals",
        "f_code",
        "f_builtins",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "tb_frame",
        "tb_next",
    }
)

# Harmless dunders that may be read on torch/triton objects (nn.Module.__init__(self), versions).
ALLOWED_TORCH_DUNDERS = frozenset(
    {"__init__", "__version__", "__name__", "__qualname__", "__doc__"}
)

# Host-side reads of tensor memory that bypass the dispatch monitor (outside @triton.jit only).
# `data_ptr` is deliberately NOT here: src/klineage/kernels/matmul/expert.py (_use_tma) reads
# t.data_ptr() % 16 for the TMA alignment check. An address is an int, not the tensor's data,
# and nothing left importable (ctypes is refused) can dereference it.
HOST_MEMORY_READS = frozenset(
    {
        "numpy",
        "tolist",
        "__array__",
        "__array_interface__",
        "__cuda_array_interface__",
        "__dlpack__",
        "to_dlpack",
        "untyped_storage",
        "typed_storage",
        "storage",
    }
)

# torch APIs that are not the candidate's Triton kernel (another compiler, registered ops,
# pickles, processes) or that change state the reference and the gate share (RNG, defaults).
BANNED_TORCH_APIS = frozenset(
    {
        "torch.library",
        "torch.ops",
        "torch.classes",
        "torch.compile",
        "torch.compiler",
        "torch.jit",
        "torch.multiprocessing",
        "torch.utils.cpp_extension",
        "torch.utils.dlpack",
        "torch.cuda.jiterator",
        "torch.cuda.cudart",
        "torch.hub",
        "torch.package",
        "torch.load",
        "torch.save",
        "torch.serialization",
        "torch.random",
        "torch.seed",
        "torch.manual_seed",
        "torch.set_rng_state",
        "torch.get_rng_state",
        "torch.cuda.seed",
        "torch.cuda.seed_all",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.cuda.set_rng_state",
        "torch.cuda.set_rng_state_all",
        "torch.cuda.get_rng_state",
        "torch.cuda.get_rng_state_all",
        "torch.set_default_dtype",
        "torch.set_default_device",
        "torch.set_default_tensor_type",
        "torch.set_float32_matmul_precision",
        "torch.use_deterministic_algorithms",
        "torch.set_flush_denormal",
    }
)

# Attribute names that smuggle a refused module in through an allowed one (torch.os, torch.sys,
# typing.sys and warnings.sys are the real modules: they import them at top level).
SMUGGLED_MODULES = frozenset(
    {
        "os",
        "sys",
        "ctypes",
        "builtins",
        "importlib",
        "inspect",
        "threading",
        "subprocess",
        "gc",
        "platform",
        "pickle",
        "marshal",
        "types",
        "socket",
        "signal",
        "traceback",
        "weakref",
        "atexit",
        "copyreg",
        "runpy",
        "mmap",
        "shutil",
        "tempfile",
        "pathlib",
        "linecache",
        "contextlib",
        "asyncio",
        "concurrent",
        "np",
    }
)

# Builtins a @triton.jit body may call (the Triton frontend understands these).
JIT_BUILTINS = frozenset(
    {
        "range",
        "min",
        "max",
        "len",
        "int",
        "float",
        "bool",
        "isinstance",
        "print",
        "tuple",
        "list",
        "zip",
        "enumerate",
        "abs",
    }
)

# math constants a @triton.jit body may read (plain floats; math *functions* run on the host).
MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})

# What `from torch... import X` / `from triton... import X` binds to a submodule rather than an
# object (a module may be used only through its attributes, so an alias cannot hide its reach).
FROM_IMPORTED_MODULES = frozenset(
    {
        "torch.nn",
        "torch.nn.functional",
        "torch.cuda",
        "torch.utils",
        "torch.autograd",
        "torch.backends",
        "torch.overrides",
        "torch.distributed",
        "torch.special",
        "torch.linalg",
        "torch.fft",
        "triton.language",
        "triton.runtime",
        "triton.compiler",
        "triton.testing",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "triton.language.math",
        "triton.language.core",
    }
)
