"""What the cluster tier runs on each host: one MultiWorkerMirroredStrategy worker per host."""
