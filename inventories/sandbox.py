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

# The link speed the cluster tier judges iperf3 against. Each host's veth says 10000 Mb/s,
# but a veth is a memory copy as fast as this machine's CPU has time for: 12 Gbit/s measured
# (4 streams, idle 2-CPU machine), less while other work shares the CPUs. 1 Gbit/s (floor 0.7)
# passes a healthy sandbox with room and fails a veth throttled to 100 Mbit/s (0.095 measured).
SANDBOX_INTERCONNECT_GBPS = 1

# Group "sandbox": every host, with the data that points the deploy at the stand-ins.
_cache = _cache_host(_state)
_group = {**_group_data(_state), "interconnect_gbps": SANDBOX_INTERCONNECT_GBPS}
if _cache is None:
    sandbox = (_host_entries(_state), _group)
else:
    # Group gpufleet_cache: the fleet cache, which alone fetches from the stand-ins.
    _everyone, _upstreams = _cache_groups(_state, _cache)
    _entries = _host_entries(_state)
    sandbox = (_entries, {**_everyone, "interconnect_gbps": SANDBOX_INTERCONNECT_GBPS})
    gpufleet_cache = ([(n, d) for n, d in _entries if n == _cache], _upstreams)
