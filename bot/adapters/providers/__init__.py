"""The provider port's adapters (`bot.core.providers`): one module per cloud, each importing its
cloud's SDK only when a cluster names that cloud (the SDK is the cloud's optional extra)."""

import importlib


def not_importable(package: str, hint: str, *modules: str) -> str:
    """Why a cloud's SDK cannot be imported, for people ("" when it can): `package` is not
    installed (`hint`: the extra that installs it), as the first of `modules` that fails to import
    says — what the adapter's `connect` refuses with."""
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as exc:
        return f"{package} is not installed ({hint}): {exc}"
    return ""
