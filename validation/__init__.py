"""The on-host validation suite: the pytest checks at this root, their parts in subpackages."""
