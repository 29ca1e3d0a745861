"""pyinfra-testing fixtures for gpufleet's operations: a folder per operation, a JSON per case."""

from pathlib import Path

from pyinfra_testing.operations import make_operation_tests

HERE = Path(__file__).parent

for _folder in sorted(p for p in HERE.iterdir() if p.is_dir() and "." in p.name):
    _test_class = make_operation_tests("gpufleet.operations", _folder.name, _folder)
    _test_class.__name__ = "TestOperation_" + _folder.name.replace(".", "_")
    globals()[_test_class.__name__] = _test_class
