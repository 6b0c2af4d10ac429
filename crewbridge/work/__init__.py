"""Configuration and policy at work (layer 4): the policy over every call, one call's path, earlier
runs, worktrees."""
