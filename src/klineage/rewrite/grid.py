"""How many programs a kernel file launches at given input shapes, read from its launcher
without running it: a structural "when" feature.

A skill that splits work over more programs (split_k, a persistent grid) pays when the kernel
it is added to launches too few programs to fill the GPU, whatever the input looks like: the
column sum's narrow regime (32 columns, one program each) gained 11x from a split over rows on
the H200, its 2048-column regimes nothing. Shape features cannot say that (the long-K matmul
launches 256 programs for 16 x 16 outputs whose "row length" is a million), and the count
changes as other rewrites reshape the grid (column tiling turns 384 column programs into 3).

`programs(source, shapes)` evaluates `ModelNew.forward` (or the module's `forward`) abstractly:
its tensor arguments are shapes, a small set of expressions is computed (integer arithmetic,
min/max, triton.cdiv and next_power_of_2, .shape/.size/.stride/.numel, torch.empty and the
like, view/reshape), calls to the file's own functions and methods are followed, and each
launch `kernel[grid](...)` records the product of its grid (a grid lambda is called with the
launch's keyword arguments as META). Anything else is unknown, and the answer is None: the
user's code is never executed (it is untrusted), only read.
"""

from __future__ import annotations

import ast
import contextlib
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any


class _Unknown(Exception):
    """An expression the evaluator does not know the value of."""


class _Tensor:
    """A tensor by its shape (contiguous strides)."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.shape = tuple(int(d) for d in shape)

    def stride(self, dim: int | None = None) -> Any:
        strides, acc = [], 1
        for d in reversed(self.shape):
            strides.append(acc)
            acc *= d
        strides.reverse()
        return tuple(strides) if dim is None else strides[dim]

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]


def _reshape(t: _Tensor, *dims: Any) -> _Tensor:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    shape = [int(d) for d in dims]
    if shape.count(-1) == 1:
        rest = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = t.numel() // rest if rest else 0
    return _Tensor(shape)


_SAME = ("contiguous", "float", "half", "bfloat16", "to", "clone", "detach", "cuda", "type")
_TENSOR_METHODS: dict[str, Callable[..., Any]] = {
    **{m: (lambda t, *a, **k: t) for m in _SAME},
    "view": _reshape,
    "reshape": _reshape,
    "flatten": lambda t, *a: _Tensor([t.numel()]),
    "t": lambda t: _Tensor(t.shape[::-1]),
    "dim": lambda t: len(t.shape),
    "stride": _Tensor.stride,
    "size": _Tensor.size,
    "numel": _Tensor.numel,
    "element_size": lambda t: 4,  # only its value's use in a grid would matter; none seen
}


def _new_tensor(*shape: Any, **_: Any) -> _Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if not all(isinstance(d, int) for d in shape):
        raise _Unknown("tensor shape")
    return _Tensor(shape)


def _like(t: Any, *_: Any, **__: Any) -> _Tensor:
    if not isinstance(t, _Tensor):
        raise _Unknown("_like of a non-tensor")
    return _Tensor(t.shape)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "int": int,
    "abs": abs,
    "len": len,
    "cdiv": _cdiv,
    "next_power_of_2": _next_power_of_2,
    "ceil": math.ceil,
    "prod": math.prod,
    "empty": _new_tensor,
    "zeros": _new_tensor,
    "ones": _new_tensor,
    "full": lambda shape, *a, **k: _new_tensor(shape),
    "empty_like": _like,
    "zeros_like": _like,
    "ones_like": _like,
    "empty_strided": lambda shape, *a, **k: _new_tensor(shape),
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_DEPTH = 4  # calls followed into the file's own functions
_BIG = 1 << 62  # integers past this are not grid sizes: unknown


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Evaluator:
    def __init__(self, module: ast.Module) -> None:
        self.functions: dict[str, ast.FunctionDef] = {}
        self.methods: dict[str, ast.FunctionDef] = {}
        self.constants: dict[str, Any] = {}
        self.launches: list[int] = []
        for node in module.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        self.methods[m.name] = m
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                # module constants: BLOCK = 1024, or computed from earlier ones
                with contextlib.suppress(_Unknown):
                    self._bind(node.targets[0], self.expr(node.value, self.constants, 0))

    # statements -----------------------------------------------------------------------------

    def call(self, fn: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any], depth: int) -> Any:
        if depth > _DEPTH:
            raise _Unknown("calls too deep")
        env = dict(self.constants)
        params = fn.args.posonlyargs + fn.args.args
        defaults = fn.args.defaults
        for p, d in zip(params[len(params) - len(defaults) :], defaults, strict=True):
            env[p.arg] = self.expr(d, self.constants, depth)
        for p, v in zip(params, args, strict=False):
            env[p.arg] = v
        for k, v in kwargs.items():
            env[k] = v
        try:
            self.block(fn.body, env, depth)
        except _Return as r:
            return r.value
        return None

    def block(self, body: list[ast.stmt], env: dict[str, Any], depth: int) -> None:
        for stmt in body:
            self.statement(stmt, env, depth)

    def statement(self, stmt: ast.stmt, env: dict[str, Any], depth: int) -> None:
        if isinstance(stmt, ast.Assign):
            value = self._value(stmt.value, env, depth)
            for t in stmt.targets:
                self._bind(t, value, env)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._bind(stmt.target, self._value(stmt.value, env, depth), env)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            op = _BINARY.get(type(stmt.op))
            old = env.get(stmt.target.id, _Unknown)
            new = self._value(stmt.value, env, depth)
            ok = op is not None and old is not _Unknown and new is not _Unknown
            env[stmt.target.id] = op(old, new) if ok and op is not None else _Unknown
        elif isinstance(stmt, ast.Expr):
            self._value(stmt.value, env, depth)
        elif isinstance(stmt, ast.Return):
            raise _Return(self._value(stmt.value, env, depth) if stmt.value else None)
        elif isinstance(stmt, ast.If):
            test = self._value(stmt.test, env, depth)
            if test is _Unknown or isinstance(test, _Tensor):
                raise _Unknown("a branch on an unknown value")
            self.block(stmt.body if test else stmt.orelse, env, depth)
        elif isinstance(stmt, (ast.Assert, ast.Pass, ast.Import, ast.ImportFrom)):
            pass
        else:  # loops, with, try: their launches are not counted, so the count is unknown
            raise _Unknown(type(stmt).__name__)

    def _value(self, node: ast.expr, env: dict[str, Any], depth: int) -> Any:
        """An expression's value, or _Unknown (the class) when it cannot be known: a statement
        that binds it continues, a launch or a branch that needs it does not."""
        try:
            return self.expr(node, env, depth)
        except _Unknown:
            if self._launches_in(node):
                raise
            return _Unknown

    @staticmethod
    def _launches_in(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in ast.walk(node)
        )

    def _bind(self, target: ast.expr, value: Any, env: dict[str, Any] | None = None) -> None:
        env = self.constants if env is None else env
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            seq = list(value) if isinstance(value, (tuple, list)) else None
            for i, t in enumerate(target.elts):
                self._bind(t, seq[i] if seq is not None and i < len(seq) else _Unknown, env)

    # expressions ----------------------------------------------------------------------------

    def expr(self, node: ast.expr, env: dict[str, Any], depth: int) -> Any:
        value = self._expr(node, env, depth)
        if value is _Unknown or (isinstance(value, int) and abs(value) > _BIG):
            raise _Unknown(ast.dump(node)[:60])
        return value

    def _expr(self, node: ast.expr, env: dict[str, Any], depth: int) -> Any:
        ev = lambda n: self.expr(n, env, depth)  # noqa: E731 - the recursion, short
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
            return node.value
        if isinstance(node, ast.Lambda):  # `grid = lambda META: ...`: a launch evaluates it
            return node
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            raise _Unknown(node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(left, _Tensor) or isinstance(right, _Tensor):
                raise _Unknown("tensor arithmetic")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base, exp = ev(node.left), ev(node.right)
            if not isinstance(exp, int) or not 0 <= exp <= 64:
                raise _Unknown("power")
            return base**exp
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not ev(node.operand)
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
            left = ev(node.left)
            for op, c in zip(node.ops, node.comparators, strict=True):
                right = ev(c)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env, depth)
        if isinstance(node, ast.Attribute):
            base = ev(node.value)
            if isinstance(base, _Tensor) and node.attr == "shape":
                return base.shape
            if isinstance(base, _Tensor) and node.attr == "ndim":
                return len(base.shape)
            raise _Unknown(node.attr)
        if isinstance(node, ast.Call):
            return self._call(node, env, depth)
        raise _Unknown(type(node).__name__)

    def _subscript(self, node: ast.Subscript, env: dict[str, Any], depth: int) -> Any:
        base = self.expr(node.value, env, depth)
        if isinstance(node.slice, ast.Slice):
            raise _Unknown("slice")
        key = self.expr(node.slice, env, depth)
        if isinstance(base, dict):
            return base.get(key, _Unknown)
        if isinstance(base, tuple) and isinstance(key, int) and -len(base) <= key < len(base):
            return base[key]
        raise _Unknown("subscript")

    def _call(self, node: ast.Call, env: dict[str, Any], depth: int) -> Any:
        if isinstance(node.func, ast.Subscript):  # kernel[grid](...): a launch
            self._launch(node, env, depth)
            return None
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise _Unknown("*args or **kwargs")
        args = [self.expr(a, env, depth) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, env, depth) for k in node.keywords if k.arg}
        func = node.func
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                if func.attr in self.methods:
                    return self.call(self.methods[func.attr], [None, *args], kwargs, depth + 1)
                raise _Unknown(f"self.{func.attr}")
            try:
                owner = self.expr(func.value, env, depth)
            except _Unknown:
                owner = None  # a module (torch, triton, math): the attribute names the function
            if isinstance(owner, _Tensor):
                method = _TENSOR_METHODS.get(func.attr)
                if method is None:
                    raise _Unknown(f"tensor.{func.attr}")
                return method(owner, *args, **kwargs)
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
            if name in self.functions:
                return self.call(self.functions[name], args, kwargs, depth + 1)
            if name in env and isinstance(env[name], ast.Lambda):
                raise _Unknown("a lambda called outside a launch")
        else:
            raise _Unknown("call")
        if name not in _FUNCTIONS:
            raise _Unknown(name)
        try:
            return _FUNCTIONS[name](*args, **kwargs)
        except (TypeError, ValueError, ArithmeticError, LookupError) as e:
            raise _Unknown(str(e)) from e

    def _launch(self, node: ast.Call, env: dict[str, Any], depth: int) -> None:
        assert isinstance(node.func, ast.Subscript)
        grid_node = node.func.slice
        if isinstance(grid_node, ast.Name) and isinstance(env.get(grid_node.id), ast.Lambda):
            grid_node = env[grid_node.id]
        if isinstance(grid_node, ast.Lambda):
            meta = {}
            for k in node.keywords:
                if k.arg:
                    with contextlib.suppress(_Unknown):
                        meta[k.arg] = self.expr(k.value, env, depth)
            inner = dict(env)
            if grid_node.args.args:
                inner[grid_node.args.args[0].arg] = meta
            grid = self.expr(grid_node.body, inner, depth)
        else:
            grid = self.expr(grid_node, env, depth)
        dims = grid if isinstance(grid, tuple) else (grid,)
        if not dims or not all(isinstance(d, int) for d in dims):
            raise _Unknown("grid")
        self.launches.append(math.prod(dims))


def programs(source: str, shapes: Sequence[Sequence[int]]) -> int | None:
    """The most programs one launch in the kernel's forward starts at these input shapes (the
    tensors of get_inputs, in order); None when the launcher cannot be read that far."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    ev = _Evaluator(module)
    fn = ev.methods.get("forward")
    if fn is None:
        fn = ev.functions.get("forward")
        first: list[Any] = []
    else:
        first = [None]  # self
    if fn is None:
        return None
    try:
        ev.call(fn, [*first, *(_Tensor(s) for s in shapes)], {}, 0)
    except (_Unknown, RecursionError, ArithmeticError, LookupError, TypeError, ValueError):
        return None
    return max(ev.launches) if ev.launches else None
