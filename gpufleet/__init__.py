"""gpufleet: provision NVIDIA GPU servers for TensorFlow with pyinfra, and prove they are fast."""

__version__ = "0.1.0"
