"""Deploy stamps: a host whose last plan was empty is not planned again until a read changes.

A run that plans and executes nothing on a host leaves a stamp on the control node: a digest of
the run's inputs (gpufleet's code, the deploy file, the inventory, the host probe) and, for every
fact the plan read, its command and a digest of the value pyinfra got. pyinfra's plan is a
function of exactly those, so the next run replays the commands in one round trip and, when
every value and the inputs match, knows the plan would be empty again and plans nothing.
"""
