"""A numpy round trip inside a function (`torch.from_numpy(np.clip(t.detach().numpy(), a, b))`, and the
usual elementwise and reduction functions, through local names): the torch functions on the tensor. Every
numpy call on a value that came from `.numpy()` must have a torch twin here, or nothing is rewritten."""

from __future__ import annotations

import libcst

from compatcheck.codemods._tree import dotted, enclosing, imported_as

_SAME = ("abs sqrt exp log log1p expm1 log2 log10 sin cos tan tanh sign floor ceil round square reciprocal "
         "maximum minimum where mean sum prod amax amin argmax argmin cumsum isnan isinf isfinite logical_and "
         "logical_or logical_not matmul").split()
# numpy's function -> torch's (most keep their name)
FUNCTIONS = {**{name: name for name in _SAME}, "absolute": "abs", "clip": "clamp", "max": "amax", "min": "amin",
             "arctan": "atan", "arcsin": "asin", "arccos": "acos", "negative": "neg", "power": "pow",
             "multiply": "mul", "add": "add", "subtract": "sub", "divide": "div", "std": "std", "var": "var"}
# an array's method -> the tensor's
METHODS = {"mean": "mean", "sum": "sum", "prod": "prod", "max": "amax", "min": "amin", "std": "std", "var": "var",
           "reshape": "reshape", "flatten": "flatten", "clip": "clamp", "item": "item", "tolist": "tolist",
           "astype": "to", "copy": "clone", "round": "round", "argmax": "argmax", "argmin": "argmin"}
KEYWORDS = {"axis": "dim", "keepdims": "keepdim", "a_min": "min", "a_max": "max", "ddof": "correction",
            "dtype": "dtype"}
DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool_", "complex64"}
_ARRAYS = {"asarray", "array", "ascontiguousarray"}
_TO_TORCH = {"torch.from_numpy", "torch.tensor", "torch.as_tensor"}


class _Unfit(Exception):
    """A numpy call on the tensor's values that has no torch twin here."""


class _Rewrite(libcst.CSTTransformer):
    def __init__(self, numpy: set[str]):
        self.numpy = numpy  # the names the prefix of numpy calls goes by: np, numpy
        self.arrays: set[str] = set()  # local names holding what came from .numpy()
        self.done = False

    def _is_array(self, node) -> bool:
        if isinstance(node, libcst.Name):
            return node.value in self.arrays
        if isinstance(node, libcst.Call):
            func = node.func
            if isinstance(func, libcst.Attribute) and func.attr.value == "numpy" and not node.args:
                return True
            if self._numpy_function(func):
                return any(self._is_array(arg.value) for arg in node.args)
            return isinstance(func, libcst.Attribute) and self._is_array(func.value)
        if isinstance(node, (libcst.BinaryOperation, libcst.Comparison)):
            parts = [node.left, node.right] if isinstance(node, libcst.BinaryOperation) else \
                [node.left, *(target.comparator for target in node.comparisons)]
            return any(self._is_array(part) for part in parts)
        if isinstance(node, (libcst.UnaryOperation, libcst.Subscript, libcst.Attribute)):
            return self._is_array(getattr(node, "expression", None) or node.value)
        return False

    def _numpy_function(self, func) -> str | None:
        name = dotted(func) or ""
        head, _, rest = name.partition(".")
        return rest if head in self.numpy and rest and "." not in rest else None

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0].target, libcst.Name) and self._is_array(node.value):
            self.arrays.add(node.targets[0].target.value)

    def leave_Call(self, original, updated):
        if not self._is_array(original) and not (dotted(original.func) in _TO_TORCH and original.args
                                                 and self._is_array(original.args[0].value)):
            return updated
        self.done = True
        func = original.func
        if isinstance(func, libcst.Attribute) and func.attr.value == "numpy" and not original.args:
            return updated.func.value
        if dotted(func) in _TO_TORCH:
            return self._as_tensor(updated, keep_copy=dotted(func) == "torch.from_numpy")
        name = self._numpy_function(func)
        if name in _ARRAYS:
            return self._as_tensor(updated, keep_copy=False)
        if name is not None:
            if name not in FUNCTIONS:
                raise _Unfit(f"np.{name}")
            return self._call(updated, libcst.parse_expression(f"torch.{FUNCTIONS[name]}"), name)
        method = func.attr.value
        if method not in METHODS:
            raise _Unfit(f".{method}()")
        return self._call(updated, updated.func.with_changes(attr=libcst.Name(METHODS[method])), method)

    def _call(self, call, func, name: str):
        args = [self._argument(arg) for arg in call.args]
        if name in ("std", "var") and not any(arg.keyword and arg.keyword.value == "correction" for arg in args):
            args.append(libcst.Arg(libcst.Integer("0"), keyword=libcst.Name("correction")))  # numpy's ddof=0
        return call.with_changes(func=func, args=args)

    def _argument(self, arg):
        if arg.star:
            raise _Unfit("a starred argument")
        value = self._dtype(arg.value)
        if arg.keyword is None:
            return arg.with_changes(value=value)
        if arg.keyword.value not in KEYWORDS:
            raise _Unfit(f"the keyword {arg.keyword.value}")
        return arg.with_changes(keyword=libcst.Name(KEYWORDS[arg.keyword.value]), value=value)

    def _dtype(self, node):
        """np.float32 as torch.float32; other expressions as they are."""
        name = dotted(node) or ""
        head, _, rest = name.partition(".")
        if head in self.numpy and rest:
            if rest not in DTYPES:
                raise _Unfit(name)
            return libcst.parse_expression(f"torch.{rest.rstrip('_')}")
        return node

    def _as_tensor(self, call, keep_copy: bool):
        """np.asarray(t, dtype=...) and torch.from_numpy(t) on what is now a tensor: the tensor, in the dtype."""
        [first, *rest] = [self._argument(arg) for arg in call.args]
        if not rest or keep_copy:
            return first.value.with_changes(lpar=call.lpar, rpar=call.rpar) if not rest else call
        return libcst.Call(libcst.parse_expression("torch.as_tensor"), [first.with_changes(comma=libcst.MaybeSentinel.DEFAULT), *rest])


def rewrite(module: libcst.Module, line: int) -> libcst.Module | None:
    numpy = imported_as(module, "numpy")
    if not numpy or "torch" not in imported_as(module, "torch"):
        return None
    wrapper, function = enclosing(module, line, libcst.FunctionDef)
    if function is None:
        return None
    transformer = _Rewrite(numpy)
    try:
        rewritten = function.visit(transformer)
    except _Unfit:
        return None
    return wrapper.module.deep_replace(function, rewritten) if transformer.done else None
