"""The training loop in memory, shared by every engine: the master (x, the update rule's state, staleness), the
staleness policies, the delay and compute-time laws, minibatch sampling and the recorder of evaluation points."""
