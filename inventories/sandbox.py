"""The local sandbox fleet (`gpufleet sandbox up`): its hosts, reached over SSH as root.

    gpufleet sandbox up --hosts 3
    pyinfra -y inventories/sandbox.py deploy/gpu_node.py
    GPUFLEET_SANDBOX_REFUSE=gfsb-h3 pyinfra ...  # gfsb-h3 declared a GPU server: preflight refuses
    GPUFLEET_SANDBOX_CACHE=gfsb-h1 pyinfra ...   # gfsb-h1 is the fleet cache (gpufleet_cache)

Hosts, addresses, keys and the stand-in URLs come from the running sandbox's state.json.
"""

from gpufleet.sandbox.inventory import cache_groups as _cache_groups
from gpufleet.sandbox.inventory import cache_host as _cache_host
from gpufleet.sandbox.inventory import group_data as _group_data
from gpufleet.sandbox.inventory import host_entries as _host_entries
from gpufleet.sandbox.state import SandboxError as _SandboxError
from gpufleet.sandbox.state import load_state as _load_state

try:
    _state = _load_state()
except _SandboxError as _exc:
    # A missing sandbox must not look like an empty inventory (pyinfra would exit 0).
    raise SystemExit(f"inventories/sandbox.py: {_exc}") from None

# Group "sandbox": every host, with the data that points the deploy at the stand-ins.
_cache = _cache_host(_state)
if _cache is None:
    sandbox = (_host_entries(_state), _group_data(_state))
else:
    # Group gpufleet_cache: the fleet cache, which alone fetches from the stand-ins.
    _everyone, _upstreams = _cache_groups(_state, _cache)
    _entries = _host_entries(_state)
    sandbox = (_entries, _everyone)
    gpufleet_cache = ([(n, d) for n, d in _entries if n == _cache], _upstreams)
