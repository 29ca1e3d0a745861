"""pyinfra-testing fixtures for the facts gpufleet's operations and stages read.

Each fixture names its source: recorded on a real machine, or constructed from a documented
output format (and then says so).
"""

from pathlib import Path

from pyinfra_testing.facts import make_fact_tests

HERE = Path(__file__).parent / "facts"
MODULES = {
    "probes": "gpufleet.operations",
    "acng": "gpufleet.operations",
    "host_probe": "gpufleet.stages",
}

for _folder in sorted(p for p in HERE.iterdir() if p.is_dir()):
    _module = _folder.name.split(".", 1)[0]
    _test_class = make_fact_tests(MODULES[_module], _folder.name, _folder)
    _test_class.__name__ = "TestFact_" + _folder.name.replace(".", "_")
    globals()[_test_class.__name__] = _test_class
