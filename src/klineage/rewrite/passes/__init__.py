"""Built-in rewrite passes; importing this package registers them all.

A pass module that fails to import is recorded in BROKEN (name -> error) rather than taking
every other pass down with it; tests assert BROKEN is empty.
"""

from importlib import import_module
from pkgutil import iter_modules

BROKEN: dict[str, str] = {}

for _info in iter_modules(__path__):
    try:
        import_module(f"{__name__}.{_info.name}")
    except Exception as _e:  # a broken pass must not disable the others
        BROKEN[_info.name] = f"{type(_e).__name__}: {_e}"
