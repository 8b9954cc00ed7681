"""Built-in rewrite passes; importing this package registers them all."""

from importlib import import_module
from pkgutil import iter_modules

for _info in iter_modules(__path__):
    import_module(f"{__name__}.{_info.name}")
