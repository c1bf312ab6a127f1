"""The values the configuration reader (kb/config/interp.py) passes around besides plain data
(kb/config/values.py): references to classes and functions of the tree, a call's frame, a method
bound to a value; and what the dataclass reading (kb/config/fields.py) asks of the reader."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Union

from kb.config.modules import Module, Modules
from kb.config.values import FieldKwargs


class PlatformText(str):
    """A text the platform gives (`current_platform.device_type`): what a value made from it holds
    on an NVIDIA GPU, marked so that the flag model keeps it apart (kb.config.read)."""


PLATFORM: dict[str, Any] = {"device_type": PlatformText("cuda")}


class Budget(Exception):
    """The reader's step budget is spent (hostile or unexpectedly large source)."""


@dataclass(frozen=True)
class ClassRef:
    module: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class FunctionRef:
    module: Module
    node: Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
    cls: Optional[ClassRef] = None  # the class it was looked up on (`cls` of a classmethod)
    owner: Optional[ClassRef] = None  # the class that defines it (for super())
    bound: tuple[Any, ...] = ()  # leading arguments already given (cls, or a default instance)
    closure: Optional[dict[str, Any]] = None

    @property
    def name(self) -> str:
        return "<lambda>" if isinstance(self.node, ast.Lambda) else self.node.name


@dataclass(frozen=True)
class SuperRef:
    cls: ClassRef
    after: ClassRef


@dataclass(frozen=True)
class Method:
    """A method of a plain value or of the parser: `"a_b".replace`, `kwargs.pop`, `group.add_argument`."""

    obj: Any
    name: str


@dataclass
class Frame:
    module: Module
    locals: dict[str, Any] = field(default_factory=dict)
    cls: Optional[ClassRef] = None
    owner: Optional[ClassRef] = None


class Evaluator(Protocol):
    """The reader as kb/config/fields.py uses it: evaluate an expression, run a function, build
    a class's default instance, walk its bases; `kwargs_cache` keeps each class's computed kwargs."""

    modules: Modules
    kwargs_cache: dict[tuple[str, str], dict[str, FieldKwargs]]

    def eval(self, node: ast.expr, frame: Frame, depth: int = 0) -> Any: ...

    def run_function(self, func: FunctionRef, args: list[Any], kwargs: dict[str, Any]) -> Any: ...

    def instance(self, cls: ClassRef) -> Any: ...

    def mro(self, cls: ClassRef) -> list[ClassRef]: ...

    def base_names(self, cls: ClassRef) -> set[str]: ...
