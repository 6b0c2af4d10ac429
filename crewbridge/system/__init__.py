"""The operating system (layer 1): child processes and their environment, git, paths beneath a
folder, trust, approval on the terminal."""
