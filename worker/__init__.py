"""The worker: runs benchmark jobs on this machine, each in a fresh child process."""
