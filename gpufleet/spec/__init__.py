"""The node spec: a host's inventory data, typed and checked (e.g. ``NodeSpec``)."""

from gpufleet.spec.defaults import (
    MINIFORGE_SHA256,
    MINIFORGE_URL,
    MINIFORGE_VERSION,
    NVIDIA_REPO_KEY_FINGERPRINT,
    PYINFRA_KEY_PREFIXES,
    USER_KEY_PREFIX,
)
from gpufleet.spec.model import (
    FIELDS,
    KEY_DOCS,
    NodeSpec,
    SpecError,
    combination_errors,
    defaults,
    from_host_data,
    is_ignored_key,
    spec_for_host,
)

__all__ = [
    "FIELDS",
    "KEY_DOCS",
    "MINIFORGE_SHA256",
    "MINIFORGE_URL",
    "MINIFORGE_VERSION",
    "NVIDIA_REPO_KEY_FINGERPRINT",
    "PYINFRA_KEY_PREFIXES",
    "USER_KEY_PREFIX",
    "NodeSpec",
    "SpecError",
    "combination_errors",
    "defaults",
    "from_host_data",
    "is_ignored_key",
    "spec_for_host",
]
