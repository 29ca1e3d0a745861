"""The cluster tier: the network between hosts and a TensorFlow job across them, as one group."""
