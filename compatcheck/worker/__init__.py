"""The worker side of a run: the child process that imports the model and runs the stages."""
